package views

import (
	"context"
	"strings"
	"testing"

	"github.com/wdc-dev/wdc/demo"
	"github.com/wdc-dev/wdc/internal/plural"
)

// The whole text output of `wdc demo worker-leases` is compared with a
// golden copy in testdata/scripts/demo_worker_leases.txtar (at the top of
// the repository); these tests cover what a successful story never prints.

func TestDemoRenderFailedCheck(t *testing.T) {
	r, err := demo.WorkerLeases(context.Background(), demo.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.Steps[5].Checks[0].OK = false
	var b strings.Builder
	if err := DemoText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	c := r.Steps[5].Checks[0]
	for _, want := range []string{
		"   FAIL  " + c.Invariant + ": " + c.Observed + "\n",
		"\n1 of " + plural.Count(r.CheckCount(), "check", "checks") + " did not hold.\n",
		"  step 6 (reassign): " + c.Invariant + ": " + c.Observed + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Every invariant held") {
		t.Errorf("a failed story claims every invariant held:\n%s", out)
	}
}

func TestDemoRenderStoppedStory(t *testing.T) {
	r, err := demo.WorkerLeases(context.Background(), demo.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.Steps = r.Steps[:2]
	r.Steps[1].State = nil
	r.Steps[1].Checks = []demo.Check{{ID: "step_completed", Invariant: "the step runs to its end", Observed: "worker A's claim: connection refused"}}
	r.Stopped = "step 2 (assign) could not go on: worker A's claim: connection refused"
	var b strings.Builder
	if err := DemoText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"2. Worker A claims the task (t+0s)\n   worker A claims: granted task.build",
		"   state: could not be read\n   FAIL  the step runs to its end: worker A's claim: connection refused\n",
		"The story stopped: step 2 (assign) could not go on: worker A's claim: connection refused.\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
	if doc := NewDemoDoc(r); doc.OK || doc.Summary.Stopped == "" || doc.Steps[1].State != nil || doc.Steps[1].OK {
		t.Errorf("the document of a stopped story: ok %v, stopped %q, step 2 state %v ok %v", doc.OK, doc.Summary.Stopped, doc.Steps[1].State, doc.Steps[1].OK)
	}
}
