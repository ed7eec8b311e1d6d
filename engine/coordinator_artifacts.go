package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Artifacts (docs/protocol.md, "Artifacts"): a result names its logs and
// outputs by hash; when the coordinator lacks some it answers 409
// missing_artifacts listing them, and remembers that this worker may now
// upload exactly those; the worker PUTs them and posts the result again.
// Nothing about the task changes until every blob is held and the fencing
// checks pass (state.AcceptResult asks the store inside its transaction).

// StderrTailLines is how many of a failed attempt's last stderr lines its
// events and `wdc tasks show` carry.
const StderrTailLines = 20

// expectLocked records that w may upload hashes (a missing_artifacts
// answer). c.mu must be held.
func (c *Coordinator) expectLocked(w *workerState, hashes []string) {
	if w.expected == nil {
		w.expected = map[string]bool{}
	}
	for _, h := range hashes {
		w.expected[h] = true
	}
}

// serveArtifact is PUT /v1/artifacts/{sha256}: a worker uploads a blob one
// of its results is waiting for. The store recomputes the hash while it
// writes a temporary file, refuses a mismatch, deduplicates, and renames
// into place atomically.
func (c *Coordinator) serveArtifact(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", http.MethodPut)
		(&httpError{status: http.StatusMethodNotAllowed, code: "bad_request", message: fmt.Sprintf("method %s is not allowed; use PUT", r.Method)}).write(w)
		return
	}
	cred, herr := c.authenticate(r, credSession)
	if herr == nil {
		_, herr = c.sessionWorker(cred, cred.worker.id)
	}
	if herr != nil {
		herr.write(w)
		return
	}
	hash, err := artifact.ParseHash(r.PathValue("sha256"))
	if err != nil {
		badRequest("%v", err).write(w)
		return
	}
	if c.artifacts == nil {
		(&httpError{status: http.StatusConflict, code: protocol.CodeNotExpected, message: "this coordinator keeps no artifacts"}).write(w)
		return
	}
	c.mu.Lock()
	expected := cred.worker.expected[hash]
	c.mu.Unlock()
	if !expected {
		(&httpError{status: http.StatusConflict, code: protocol.CodeNotExpected,
			message: fmt.Sprintf("no result of worker %s is waiting for blob %s: post the result first, then upload what it is answered missing", cred.worker.id, hash)}).write(w)
		return
	}
	if max := c.artifacts.MaxSize(); r.ContentLength > max {
		(&httpError{status: http.StatusRequestEntityTooLarge, code: protocol.CodeTooLarge,
			message: fmt.Sprintf("blob %s is %d bytes, more than max_artifact_size (%s)", hash, r.ContentLength, artifact.FormatSize(max))}).write(w)
		return
	}
	res, err := c.artifacts.Put(r.Context(), hash, r.Body)
	var mm *artifact.MismatchError
	switch {
	case errors.As(err, &mm):
		badRequestCode(protocol.CodeHashMismatch, "the uploaded content has SHA-256 %s, not %s: nothing was stored", mm.Got, hash).write(w)
		return
	case errors.Is(err, artifact.ErrTooLarge):
		(&httpError{status: http.StatusRequestEntityTooLarge, code: protocol.CodeTooLarge, message: err.Error()}).write(w)
		return
	case err != nil && r.Context().Err() != nil:
		return // the client went away
	case err != nil:
		internal(err).write(w)
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, protocol.PutArtifactResponse{SHA256: res.Hash, Size: res.Size, Created: res.Created})
}

func badRequestCode(code, format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// missingAnswer is the 409 of a result that waits for blobs.
func missingAnswer(missing []string) *httpError {
	return &httpError{status: http.StatusConflict, code: protocol.CodeMissingArtifacts, missing: missing,
		message: fmt.Sprintf("upload %d artifact(s) with PUT /v1/artifacts/{sha256}, then post the result again", len(missing))}
}

// artifactsOf converts a result's artifact references for the state.
func artifactsOf(refs []protocol.ArtifactRef) []state.Artifact {
	out := make([]state.Artifact, len(refs))
	for i, r := range refs {
		out[i] = state.Artifact{Kind: r.Kind, Name: r.Name, SHA256: r.SHA256, Size: r.Size, MediaType: r.MediaType}
	}
	return out
}

// stderrTail returns the last StderrTailLines lines of the stderr log among
// arts, from the store (at most the last 64 KiB are read), redacted; "" when
// there is none.
func (c *Coordinator) stderrTail(arts []state.Artifact) string {
	if c.artifacts == nil {
		return ""
	}
	for _, a := range arts {
		if a.Kind == state.ArtifactLog && a.Name == "stderr" {
			tail, err := TailBlob(c.artifacts, a.SHA256, StderrTailLines)
			if err != nil {
				c.log.Warn("reading a stderr log", "sha256", a.SHA256, "err", err)
				return ""
			}
			if c.redact != nil {
				tail = c.redact(tail)
			}
			return tail
		}
	}
	return ""
}

// TailBlob returns the last n lines of a blob of store (reading at most its
// last 64 KiB), without a final newline. Errors: the blob cannot be read.
func TailBlob(store *artifact.Store, hash string, n int) (string, error) {
	f, size, err := store.Open(hash)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const window = 64 << 10
	off := max(size-window, 0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, window))
	if err != nil {
		return "", err
	}
	b = bytes.TrimRight(b, "\n")
	lines := strings.Split(string(b), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line was cut by the window
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.ToValidUTF8(strings.Join(lines, "\n"), "\uFFFD"), nil
}
