package agent

import "testing"

func TestClassifyStopSignal(t *testing.T) {
	code := 1
	tests := []struct {
		name     string
		ex       execution
		stopping bool
		class    string
	}{
		{"SIGTERM while the worker stops", execution{class: ClassFailure, signal: "SIGTERM"}, true, ClassLost},
		{"SIGKILL while the worker stops", execution{class: ClassFailure, signal: "SIGKILL"}, true, ClassLost},
		{"SIGTERM, worker running", execution{class: ClassFailure, signal: "SIGTERM"}, false, ClassFailure},
		{"SIGSEGV while the worker stops", execution{class: ClassFailure, signal: "SIGSEGV"}, true, ClassFailure},
		{"exit status while the worker stops", execution{class: ClassFailure, exitCode: &code}, true, ClassFailure},
		{"timed out while the worker stops", execution{class: ClassFailure, signal: "SIGTERM", timedOut: true}, true, ClassFailure},
		{"success while the worker stops", execution{}, true, ""},
		{"already lost", execution{class: ClassLost, signal: "SIGTERM", err: "drain"}, true, ClassLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classifyStopSignal(tt.ex, tt.stopping)
			if got.class != tt.class {
				t.Errorf("class %q, want %q (err %q)", got.class, tt.class, got.err)
			}
			if tt.ex.err == "drain" && got.err != "drain" {
				t.Errorf("an attempt the agent stopped keeps its reason, got %q", got.err)
			}
		})
	}
	if isClosed(nil) {
		t.Error("a nil channel is not closed")
	}
	ch := make(chan struct{})
	close(ch)
	if !isClosed(ch) {
		t.Error("a closed channel is closed")
	}
}
