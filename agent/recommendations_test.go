package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
)

func TestReadRecommendations(t *testing.T) {
	tests := []struct {
		name     string
		content  *string
		wantRaw  string
		wantProb string
	}{
		{name: "no file"},
		{name: "a list", content: ptr(`[{"type":"flake","input":{"run":"1"}}]`), wantRaw: `[{"type":"flake","input":{"run":"1"}}]`},
		{name: "not JSON", content: ptr(`[{"type":`), wantProb: "is not valid JSON: unexpected end of JSON input"},
		{name: "a number beyond float64", content: ptr(`[{"type":"a","input":{"n":1e400}}]`), wantRaw: `[{"type":"a","input":{"n":1e400}}]`},
		{name: "not JSON at a byte", content: ptr(`[{"type" "flake"}]`), wantProb: `after object key (at byte 10)`},
		{name: "too large", content: ptr(`"` + strings.Repeat("x", protocol.MaxRecommendationsBytes) + `"`), wantProb: "is 65,538 bytes, more than the 64 KiB (65,536 bytes) allowed"},
		{name: "exactly the limit", content: ptr(`"` + strings.Repeat("x", protocol.MaxRecommendationsBytes-2) + `"`),
			wantRaw: `"` + strings.Repeat("x", protocol.MaxRecommendationsBytes-2) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.content != nil {
				if err := os.WriteFile(filepath.Join(dir, protocol.RecommendationsFile), []byte(*tt.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			raw, prob := readRecommendations(dir)
			if string(raw) != tt.wantRaw {
				t.Errorf("raw = %.40q…, want %.40q…", raw, tt.wantRaw)
			}
			if (prob == "") != (tt.wantProb == "") || !strings.Contains(prob, tt.wantProb) {
				t.Errorf("problem = %q, want one containing %q", prob, tt.wantProb)
			}
		})
	}
	t.Run("a folder in its place", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, protocol.RecommendationsFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if raw, prob := readRecommendations(dir); raw != nil || prob != "recommendations.json is a directory, not a regular file" {
			t.Errorf("got %q, %q; want: is a directory", raw, prob)
		}
	})
	t.Run("a FIFO in its place", func(t *testing.T) {
		dir := t.TempDir()
		if err := syscall.Mkfifo(filepath.Join(dir, protocol.RecommendationsFile), 0o644); err != nil {
			t.Skip("no FIFOs here:", err)
		}
		done := make(chan string, 1)
		go func() { _, prob := readRecommendations(dir); done <- prob }()
		select {
		case prob := <-done:
			if prob != "recommendations.json is a FIFO (named pipe), not a regular file" {
				t.Errorf("problem %q; want: not a regular file", prob)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("reading a FIFO blocks the agent")
		}
	})
}

func ptr(s string) *string { return &s }
