package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/protocol"
)

// TestFitArtifacts: a log over max_artifact_size is replaced by its tail
// under a note, within the cap; an output over it is left out and fails
// the attempt naming it; what fits is untouched; an unknown cap changes
// nothing.
func TestFitArtifacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, n int) (protocol.ArtifactRef, string) {
		path := filepath.Join(dir, name)
		body := strings.Repeat("x", n-6) + "\nlast\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		h, size, err := artifact.HashFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return protocol.ArtifactRef{Name: name, SHA256: h, Size: size}, path
	}
	stdout, stdoutPath := write("stdout", 5000)
	stdout.Kind = protocol.ArtifactLog
	stderr, stderrPath := write("stderr", 100)
	stderr.Kind = protocol.ArtifactLog
	big, bigPath := write("big.bin", 3000)
	big.Kind = protocol.ArtifactOutput
	small, smallPath := write("small.txt", 200)
	small.Kind = protocol.ArtifactOutput
	files := map[string]string{stdout.SHA256: stdoutPath, stderr.SHA256: stderrPath, big.SHA256: bigPath, small.SHA256: smallPath}
	zero := 0
	req := protocol.ResultRequest{ExitCode: &zero, Artifacts: []protocol.ArtifactRef{stdout, stderr, big, small}}

	unchanged := req
	unchanged.Artifacts = append([]protocol.ArtifactRef(nil), req.Artifacts...)
	fitArtifacts(&unchanged, files, 0)
	if len(unchanged.Artifacts) != 4 || unchanged.FailureClass != "" {
		t.Errorf("an unknown cap changed the result: %+v", unchanged)
	}

	fitArtifacts(&req, files, 1024)
	if req.FailureClass != ClassFailure || !strings.Contains(req.Error, "output big.bin is 2.9 KiB, more than the coordinator's max_artifact_size (1.0 KiB)") {
		t.Errorf("result = class %q, error %q; want a failure naming big.bin", req.FailureClass, req.Error)
	}
	names := map[string]protocol.ArtifactRef{}
	for _, r := range req.Artifacts {
		names[r.Name] = r
	}
	if _, ok := names["big.bin"]; ok || len(names) != 3 {
		t.Errorf("artifacts after fitting = %+v; want stdout, stderr, small.txt", req.Artifacts)
	}
	if names["stderr"] != stderr || names["small.txt"] != small {
		t.Errorf("what fits changed: %+v", req.Artifacts)
	}
	got := names["stdout"]
	tail, err := os.ReadFile(files[got.SHA256])
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != 1024 || int64(len(tail)) != got.Size || !strings.HasPrefix(string(tail), "[wdc: the first ") || !strings.HasSuffix(string(tail), "\nlast\n") {
		t.Errorf("stdout tail = %d bytes (ref says %d): %.80q … %q", len(tail), got.Size, tail, tail[max(len(tail)-10, 0):])
	}
	if h, _, _ := artifact.HashFile(files[got.SHA256]); h != got.SHA256 {
		t.Errorf("the tail's ref does not hash its file")
	}
	// The log itself now holds only its tail, 0600, with no copy beside it.
	if files[got.SHA256] != stdoutPath {
		t.Errorf("the tail is at %s, want it in place of the log %s", files[got.SHA256], stdoutPath)
	}
	if fi, err := os.Stat(stdoutPath); err != nil || fi.Size() != 1024 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the log after fitting: %v, %v; want 1024 bytes, mode 0600", fi, err)
	}
	if _, err := os.Stat(stdoutPath + ".tail"); err == nil {
		t.Errorf("a .tail copy stays beside the log")
	}
}
