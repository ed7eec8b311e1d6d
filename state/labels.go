package state

import (
	"encoding/json"
	"fmt"
)

// encodeLabels stores a label map as a JSON object ("{}" for none).
func encodeLabels(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, err := json.Marshal(m) // map[string]string always marshals; keys sorted
	if err != nil {
		panic(err)
	}
	return string(b)
}

// decodeLabels reads a stored label object; an empty object is nil.
func decodeLabels(s string) (map[string]string, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode labels %q: %w", s, err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
