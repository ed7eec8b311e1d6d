package testclock

import (
	"testing"
	"time"
)

func TestAdvance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []time.Duration
		want  time.Duration
	}{
		{"zero value reads the wall clock", nil, 0},
		{"jumps add up", []time.Duration{time.Minute, 10 * time.Minute}, 11 * time.Minute},
		{"never goes back", []time.Duration{time.Hour, -time.Minute, 0}, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Clock
			before := time.Now()
			for _, d := range tc.steps {
				c.Advance(d)
			}
			now := c.Now()
			after := time.Now()
			if c.Skipped() != tc.want {
				t.Fatalf("Skipped() = %s, want %s", c.Skipped(), tc.want)
			}
			if now.Before(before.Add(tc.want)) || now.After(after.Add(tc.want)) {
				t.Fatalf("Now() = %s, want between %s and %s", now, before.Add(tc.want), after.Add(tc.want))
			}
		})
	}
}
