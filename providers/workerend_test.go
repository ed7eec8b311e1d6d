package providers

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestWorkerEnd(t *testing.T) {
	e := NewWorkerEnd()
	if e.Ended() || !e.Status().Running {
		t.Fatalf("a new end: Ended %v, Status %+v; want running", e.Ended(), e.Status())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.Wait(ctx); err == nil {
		t.Error("Wait on a running worker returned before ctx was done")
	}
	code := 3
	var wg sync.WaitGroup
	firsts := make(chan bool, 8)
	for i := range 8 { // racing watchers: one end wins
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := code + i
			firsts <- e.Finish(WaitResponse{ExitCode: &c, Reason: "exited"})
		}()
	}
	wg.Wait()
	close(firsts)
	n := 0
	for f := range firsts {
		if f {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d calls of Finish counted, want 1", n)
	}
	got, err := e.Wait(context.Background())
	if err != nil || got.ExitCode == nil || got.Reason != "exited" {
		t.Fatalf("Wait = %+v, %v", got, err)
	}
	if st := e.Status(); st.Running || st.ExitCode == nil || *st.ExitCode != *got.ExitCode {
		t.Errorf("Status %+v, want the exit code Wait gave (%d)", st, *got.ExitCode)
	}
	if e.Finish(WaitResponse{Reason: "later"}) {
		t.Error("a Finish after the end counted")
	}
	select {
	case <-e.Done():
	default:
		t.Error("Done is not closed after the end")
	}
}
