package artifact

import (
	"errors"
	"fmt"
)

// Sentinel errors. Functions wrap them with details (the hash, the cap);
// test for them with errors.Is.
var (
	// ErrInvalidHash means a string is not a hash as this package writes
	// them: 64 lowercase hex digits, without prefix.
	ErrInvalidHash = errors.New("artifact: invalid hash")
	// ErrTooLarge means more bytes arrived than the store's size cap.
	ErrTooLarge = errors.New("artifact: blob exceeds the size cap")
	// ErrNotFound means the store does not hold the blob asked for.
	ErrNotFound = errors.New("artifact: blob not found")
)

// MismatchError is returned by Store.Put when the bytes it received do not
// hash to the hash the caller claimed. Nothing was stored. Find it with
// errors.As.
type MismatchError struct {
	// Want is the claimed hash, Got the hash of the bytes received (both 64
	// lowercase hex digits).
	Want, Got string
	// Size is how many bytes were received.
	Size int64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("artifact: the %d bytes received hash to %s, not to the claimed %s", e.Size, e.Got, e.Want)
}

// tooLarge is the error for a blob of more than max bytes.
func tooLarge(max int64) error {
	return fmt.Errorf("%w: more than %d bytes (%s) arrived", ErrTooLarge, max, FormatSize(max))
}
