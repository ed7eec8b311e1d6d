package coordinator

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/state"
)

// TestStderrTailOfAnEmptyLog: an empty stderr has an empty tail, read
// without its blob, which the store need not hold (a result's empty logs
// are never asked of it): no warning, no file opened.
func TestStderrTailOfAnEmptyLog(t *testing.T) {
	st, err := artifact.Open(filepath.Join(t.TempDir(), "artifacts"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Stat(artifact.EmptyHash); err != nil || ok {
		t.Fatalf("a fresh store holds the empty blob (%v, %v); the test needs it absent", ok, err)
	}
	var logged bytes.Buffer
	c := &Coordinator{artifacts: st, log: slog.New(slog.NewTextHandler(&logged, nil))}
	tail := c.stderrTail([]state.Artifact{{Kind: state.ArtifactLog, Name: "stderr", SHA256: artifact.EmptyHash}})
	if tail != "" || logged.Len() != 0 {
		t.Errorf("stderr tail of an empty log = %q, logged %q; want empty, nothing logged", tail, logged.String())
	}
}
