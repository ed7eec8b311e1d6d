package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{name: "not JSON", content: ptr(`[{"type":`), wantProb: "is not valid JSON"},
		{name: "too large", content: ptr(`"` + strings.Repeat("x", protocol.MaxRecommendationsBytes) + `"`), wantProb: "larger than the 65536 bytes"},
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
		if raw, prob := readRecommendations(dir); raw != nil || !strings.Contains(prob, "could not be read") {
			t.Errorf("got %q, %q; want a read problem", raw, prob)
		}
	})
}

func ptr(s string) *string { return &s }
