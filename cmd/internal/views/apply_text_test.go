package views

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/cmd/internal/jsonplan"
	"github.com/wdc-dev/wdc/engine/coordinator"
)

func TestStatusLine(t *testing.T) {
	t.Parallel()
	c := progressCounts{Done: 3, Total: 10, Succeeded: 2, Failed: 1, Attempts: 5}
	el := 12400 * time.Millisecond
	head := "[3/10] 2 succeeded, 1 failed, 5 attempts, 12.4s"
	cases := []struct {
		name    string
		running []string
		width   int
		want    string
	}{
		{"nothing running", nil, 80, head},
		{"all fit", []string{"task.a", "task.b[1]"}, 80, head + " · running: task.a, task.b[1]"},
		{"some fit", []string{"task.a", "task.b[1]", "task.c", "task.d"}, len(head) + 40, head + " · running: task.a, task.b[1] +2 more"},
		{"none fit", []string{"task.a-very-long-name"}, len(head) + 10, head + " · 1 running"},
	}
	for _, tc := range cases {
		if got := statusLine(c, tc.running, el, tc.width); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// The status line follows the events: a leased attempt runs until an event
// ends it (its own token), and finished tasks count toward done/total.
func TestProgressViewTracksRunningAttempts(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	v := NewApplyText(&buf, func() int { return 80 })
	if err := v.Plan(&jsonplan.Plan{Summary: jsonplan.Summary{Total: 3, Run: 3, Text: "Plan: 3 tasks to run."}}, false); err != nil {
		t.Fatal(err)
	}
	v.begin = time.Now()
	for _, e := range []coordinator.Event{
		{Kind: coordinator.EventLeased, Task: "task.a", Attempt: 1, Token: 1},
		{Kind: coordinator.EventLeased, Task: "task.b", Attempt: 1, Token: 2},
		{Kind: coordinator.EventRetried, Task: "task.b", Attempt: 1, Token: 2},
		{Kind: coordinator.EventLeased, Task: "task.b", Attempt: 2, Token: 3},
		{Kind: coordinator.EventSucceeded, Task: "task.a", Attempt: 1, Token: 1},
		{Kind: coordinator.EventCancelled, Task: "task.c"},
	} {
		v.Event(e)
	}
	out := buf.String()
	last := out[strings.LastIndex(out, "\r\x1b[K")+len("\r\x1b[K"):]
	if !strings.HasPrefix(last, "[2/3] 1 succeeded, 0 failed, 3 attempts, ") || !strings.HasSuffix(last, " · running: task.b") {
		t.Errorf("status line = %q", last)
	}
}

func TestEventLineNamesTheAttemptOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		e    coordinator.Event
		want string
	}{
		{coordinator.Event{Kind: coordinator.EventFailed, Task: "task.a", Attempt: 4, Message: "attempt 4 failed (failure 4 of 4; failure budget spent): exit status 1"},
			"failed     task.a: attempt 4 failed (failure 4 of 4; failure budget spent): exit status 1"},
		{coordinator.Event{Kind: coordinator.EventReleased, Task: "task.a", Attempt: 1, Message: "apply interrupted before the attempt reported"},
			"released   task.a: attempt 1: apply interrupted before the attempt reported"},
		{coordinator.Event{Kind: coordinator.EventRetried, Task: "task.a", Attempt: 1, Message: "attempt 12 of another task"},
			"retried    task.a: attempt 1: attempt 12 of another task"},
	} {
		if got := eventLine(tt.e); got != tt.want {
			t.Errorf("eventLine(%+v) =\n  %q, want\n  %q", tt.e, got, tt.want)
		}
	}
}

// TestIndentTailIsPrintable: a failed attempt's stderr tail reaches the
// apply's output one "stderr |" line per line, with what a terminal would
// act on (an escape sequence, a carriage return inside a line, a
// bidirectional override) written as escapes, and a CRLF's "\r" dropped.
func TestIndentTailIsPrintable(t *testing.T) {
	t.Parallel()
	const p = "           stderr | "
	for _, c := range []struct{ name, tail, want string }{
		{"plain", "boom\nat line 3", p + "boom\n" + p + "at line 3\n"},
		{"colour", "\x1b[31mred\x1b[0m", p + `\x1b[31mred\x1b[0m` + "\n"},
		{"clear the screen", "\x1b[2J\x1b[Hforged: succeeded", p + `\x1b[2J\x1b[Hforged: succeeded` + "\n"},
		{"overwrite the line", "real\rforged", p + `real\rforged` + "\n"},
		{"CRLF", "one\r\ntwo\r", p + "one\n" + p + "two\n"},
		{"bidirectional override", "abc\u202edef", p + `abc\u202edef` + "\n"},
		{"not UTF-8", "a\xffb", p + `a\xffb` + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := indentTail(c.tail); got != c.want {
				t.Errorf("indentTail(%q)\n = %q\nwant %q", c.tail, got, c.want)
			}
		})
	}
}
