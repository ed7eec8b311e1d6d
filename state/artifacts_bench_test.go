package state

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkAcceptArtifacts accepts a result that names 1,000 outputs:
// the time of recording its artifacts, in multi-row statements of
// artifactRowsPerInsert rows (docs/PERFORMANCE.md, "Rows a statement").
func BenchmarkAcceptArtifacts(b *testing.B) {
	ctx := context.Background()
	as := make([]Artifact, 1000)
	for i := range as {
		as[i] = Artifact{Kind: "output", Name: fmt.Sprintf("o%05d", i), SHA256: strings.Repeat("ab", 32), Size: 3}
	}
	zero := 0
	for b.Loop() {
		b.StopTimer()
		s := setup(b)
		seed(b, s)
		l, err := s.ClaimLease(ctx, GrantRequest{Task: "task.a", WorkerID: "w1", Timeout: time.Hour}, t0)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		dec, err := s.AcceptResult(ctx, ResultInput{Key: "k", Token: l.Token, Task: "task.a", Attempt: l.Attempt, WorkerID: "w1",
			ExitCode: &zero, Artifacts: as}, nil, t0)
		if err != nil || dec.Decision != DecisionAccepted {
			b.Fatalf("accept: %+v, %v", dec, err)
		}
	}
}
