package views

import (
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/state"
)

// TestPrintable: every rune that is not graphic, and every byte that is
// not UTF-8, is written as a Go escape; plain text (accents, CJK, emoji,
// quotes, backslashes) comes back as it is.
func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"lab1.example.com", "lab1.example.com"},
		{`exec: "x\y": héllo 世界 🙂`, `exec: "x\y": héllo 世界 🙂`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"\u2066isolate\u2069", `\u2066isolate\u2069`},
		{"a\tb\nc\r", `a\tb\nc\r`},
		{"clear\x1b[2Jscreen", `clear\x1b[2Jscreen`},
		{"nul\x00here", `nul\x00here`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"zero\u200bwidth", `zero\u200bwidth`},
	} {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestListingsEscapeWhatWorkersSay: the text views print of what a worker
// or a task controls (an error, an event's message, an artifact's name, a
// signal, the stderr tail) shows a right-to-left override as \u202e,
// never raw.
func TestListingsEscapeWhatWorkersSay(t *testing.T) {
	t.Parallel()
	const rlo = "\u202e"
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	code := 1
	d := &TaskDetail{
		Task: state.Task{Address: "task.a", Status: state.TaskFailed, Attempts: 1, LastError: "exit 1: " + rlo + "gnp.exe"},
		Attempts: []state.Attempt{{Number: 1, WorkerID: "w-1", Token: 1, StartedAt: at, EndedAt: at, ExitCode: &code,
			FailureClass: "failure", Artifacts: []state.Artifact{{Kind: "output", Name: "out/" + rlo + "fdp.exe", SHA256: strings.Repeat("ab", 32), Size: 3}}}},
		Results: []state.Result{{Decision: state.DecisionRejected, WorkerID: "w-1", Token: 1, Reason: "stale " + rlo + "token", ReceivedAt: at,
			Body: []byte(`{"artifacts": [{"kind": "output", "name": "out/\u202ex", "sha256": "cd"}]}`)}},
		Events:      []state.Event{{Seq: 1, At: at, Kind: "failed", Message: "attempt 1 failed: " + rlo + "exit"}},
		StderrTails: map[int]string{1: "panic: " + rlo + "x\n\tmain.main()"},
	}
	var b strings.Builder
	if err := d.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, rlo) {
		t.Errorf("tasks show prints U+202E raw:\n%s", out)
	}
	for _, want := range []string{`last error: exit 1: \u202egnp.exe`, `out/\u202efdp.exe 3 B`, `stale \u202etoken; artifacts: out/\u202ex`,
		`attempt 1 failed: \u202eexit`, `  | panic: \u202ex`, "  | \tmain.main()"} {
		if !strings.Contains(out, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, out)
		}
	}
	line := eventLine(coordinator.Event{Kind: coordinator.EventFailed, Task: "task.a", Attempt: 1, Message: "attempt 1 failed: " + rlo + "exit\x1b[2J"})
	if want := `failed     task.a: attempt 1 failed: \u202eexit\x1b[2J`; line != want {
		t.Errorf("eventLine = %q, want %q", line, want)
	}
}
