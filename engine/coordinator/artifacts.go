package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/state"
)

// Artifacts (docs/protocol.md, "Artifacts"): a result names its logs and
// outputs by hash; when the coordinator lacks some it refuses the result
// (CodeMissingArtifacts) listing them, and remembers that this worker may now
// upload exactly those; the worker PUTs them and posts the result again.
// Nothing about the task changes until every blob is held and the fencing
// checks pass (state.AcceptResult asks the store inside its transaction).

// StderrTailLines is how many of a failed attempt's last stderr lines its
// events and `wdc tasks show` carry.
const StderrTailLines = 20

// expectLocked records that w may upload hashes for its result of the
// lease token (a missing_artifacts answer). c.mu must be held.
func (c *Coordinator) expectLocked(w *workerState, token int64, hashes []string) {
	if w.expected == nil {
		w.expected = map[int64]map[string]bool{}
	}
	if w.expected[token] == nil {
		w.expected[token] = map[string]bool{}
	}
	for _, h := range hashes {
		w.expected[token][h] = true
	}
}

// expectsLocked reports whether a result of w waits for blob hash. c.mu
// must be held.
func (w *workerState) expectsLocked(hash string) bool {
	for _, hashes := range w.expected {
		if hashes[hash] {
			return true
		}
	}
	return false
}

// PutArtifact stores a blob that s's worker uploads as hash (size bytes,
// or -1 when unknown), which a result of the worker's is waiting for: the
// store recomputes the hash while it writes a temporary file, refuses a
// mismatch, deduplicates, and renames into place atomically; the answer
// says whether the blob is new (Created). Errors (*Error): a coordinator
// without artifacts, or a blob no result of the worker's waits for
// (CodeNotExpected); a blob over the store's size cap (CodeTooLarge);
// content of another hash (CodeHashMismatch, nothing stored); the
// store's own errors (ctx's when it ended).
func (c *Coordinator) PutArtifact(ctx context.Context, s Session, hash string, size int64, body io.Reader) (protocol.PutArtifactResponse, error) {
	w := s.w
	if c.artifacts == nil {
		return protocol.PutArtifactResponse{}, errNoArtifacts()
	}
	c.mu.Lock()
	expected := w.expectsLocked(hash)
	c.mu.Unlock()
	if !expected {
		return protocol.PutArtifactResponse{}, refuse(CodeNotExpected, "",
			"no result of worker %s is waiting for blob %s: post the result first, then upload what it is answered missing", w.id, hash)
	}
	if max := c.artifacts.MaxSize(); size > max {
		return protocol.PutArtifactResponse{}, refuse(CodeTooLarge, "",
			"blob %s is %d bytes, more than max_artifact_size (%s)", hash, size, artifact.FormatSize(max))
	}
	res, err := c.artifacts.Put(ctx, hash, body)
	var mm *artifact.MismatchError
	switch {
	case errors.As(err, &mm):
		return protocol.PutArtifactResponse{}, refuse(CodeHashMismatch, "", "the uploaded content has SHA-256 %s, not %s: nothing was stored", mm.Got, hash)
	case errors.Is(err, artifact.ErrTooLarge):
		return protocol.PutArtifactResponse{}, refuse(CodeTooLarge, "", "%s", err.Error())
	case err != nil:
		return protocol.PutArtifactResponse{}, err
	}
	return protocol.PutArtifactResponse{SHA256: res.Hash, Size: res.Size, Created: res.Created}, nil
}

// errNoArtifacts is the refusal of a coordinator that keeps no artifacts.
func errNoArtifacts() *Error {
	return refuse(CodeNotExpected, "", "this coordinator keeps no artifacts")
}

// missingArtifacts is the refusal of a result that waits for blobs.
func missingArtifacts(missing []string) *Error {
	return &Error{Code: CodeMissingArtifacts, Missing: missing,
		Message: fmt.Sprintf("upload %d artifact(s) with PUT /v1/artifacts/{sha256}, then post the result again", len(missing))}
}

// CheckArtifactNames checks the name of every artifact a result names
// (protocol.CheckArtifactName); the error names the first bad one and its
// kind. Package httpapi runs it when it decodes a result, and Result
// again, before anything else.
func CheckArtifactNames(refs []protocol.ArtifactRef) error {
	for _, r := range refs {
		if err := protocol.CheckArtifactName(r.Name); err != nil {
			kind := r.Kind
			if kind == "" {
				kind = "artifact"
			}
			return fmt.Errorf("%s %q %v", kind, r.Name, err)
		}
	}
	return nil
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
			if a.SHA256 == artifact.EmptyHash {
				return "" // nothing to read, and no blob needed (admit asks none for an empty log)
			}
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

// assignmentInputs lists the files an attempt of ts gets before its
// command starts: the definition's inputs, then each input block's
// upstream outputs (those of its accepted, current attempt) matching the
// block's pattern, under the block's folder. An error leaves the mounts
// that could not be read out (the agent then lacks those files).
func (c *Coordinator) assignmentInputs(ctx context.Context, ts *taskState) ([]protocol.InputFile, error) {
	d := ts.rt.Definition
	if len(d.Inputs) == 0 && len(d.Mounts) == 0 {
		return nil, nil
	}
	out := append([]protocol.InputFile(nil), d.Inputs...)
	var firstErr error
	for _, m := range d.Mounts {
		outs, err := c.store.AcceptedOutputs(ctx, m.From)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, a := range outs {
			if ok, _ := path.Match(m.Output, a.Name); ok {
				out = append(out, protocol.InputFile{Path: m.Name + "/" + a.Name, SHA256: a.SHA256, Size: a.Size})
			}
		}
	}
	return out, firstErr
}

// readableLocked lets w download the blobs of files (the inputs of an
// assignment it was granted). c.mu must be held.
func (c *Coordinator) readableLocked(w *workerState, files []protocol.InputFile) {
	if len(files) == 0 {
		return
	}
	if w.readable == nil {
		w.readable = map[string]bool{}
	}
	for _, f := range files {
		w.readable[f.SHA256] = true
	}
}

// OpenInput opens the blob hash for s's worker (GET /v1/artifacts), and
// returns its size, when it is an input of an assignment the worker was
// granted. Any other blob, held or not, is refused alike (CodeNotFound),
// so a worker learns nothing about what else the store holds. The caller
// closes the blob.
func (c *Coordinator) OpenInput(s Session, hash string) (io.ReadCloser, int64, error) {
	worker := s.w
	c.mu.Lock()
	ok := worker.readable[hash]
	c.mu.Unlock()
	notFound := refuse(CodeNotFound, "", "no input of an assignment of worker %s has SHA-256 %s", worker.id, hash)
	if !ok || c.artifacts == nil {
		return nil, 0, notFound
	}
	f, size, err := c.artifacts.Open(hash)
	if err != nil {
		return nil, 0, notFound
	}
	return f, size, nil
}

// GC is CollectGarbage beside the running apply (the operator
// route behind `wdc gc`): it keeps, beyond what the state refers to, every
// blob a worker was told to upload (a result in flight names it), and
// removes only temporary files older than an hour (an upload may be in
// progress). State writes wait while it runs. Errors: a coordinator that
// keeps no artifacts (CodeNotExpected); CollectGarbage's.
func (c *Coordinator) GC(ctx context.Context, dryRun bool) (protocol.GCResponse, error) {
	if c.artifacts == nil {
		return protocol.GCResponse{}, errNoArtifacts()
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return CollectGarbage(ctx, c.store, c.artifacts, GCOptions{DryRun: dryRun, TempOlderThan: time.Hour, Keep: func() map[string]bool {
		keep := map[string]bool{}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, w := range c.workers {
			for _, hashes := range w.expected {
				for h := range hashes {
					keep[h] = true
				}
			}
		}
		return keep
	}})
}
