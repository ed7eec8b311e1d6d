package supervise

import (
	"testing"

	"pgregory.net/rapid"
)

func TestSupervise(t *testing.T) {
	t.Parallel()
	pool := func(o Observation) Observation {
		if o.Capacity == 0 {
			o.Capacity = 1
		}
		if o.Max == 0 {
			o.Max = 4
		}
		return o
	}
	for _, tc := range []struct {
		name   string
		o      Observation
		action Action
		count  int
		reason string
	}{
		{"a burst starts what it fills, up to the ceiling", pool(Observation{Queued: 20, Unfinished: 20}), Launch, 4,
			"20 queued tasks and 0 free slots (0 busy, 0 idle, 0 pending, min 0, ceiling 4)"},
		{"one queued task starts one worker", pool(Observation{Queued: 1, Unfinished: 1}), Launch, 1,
			"1 queued task and 0 free slots (0 busy, 0 idle, 0 pending, min 0, ceiling 4)"},
		{"capacity: five tasks fill two workers of three slots", pool(Observation{Queued: 5, Unfinished: 5, Capacity: 3}), Launch, 2,
			"5 queued tasks and 0 free slots (0 busy, 0 idle, 0 pending, min 0, ceiling 4)"},
		{"a pending launch counts: no second launch", pool(Observation{Queued: 1, Unfinished: 1, Pending: 1}), Hold, 0,
			"waiting for 1 pending worker to register"},
		{"more queued than the pending worker takes", pool(Observation{Queued: 3, Unfinished: 3, Pending: 1}), Launch, 2,
			"3 queued tasks and 1 free slot (0 busy, 0 idle, 1 pending, min 0, ceiling 4)"},
		{"grows to the ceiling at once", pool(Observation{Queued: 18, Unfinished: 20, Busy: 2}), Launch, 2,
			"18 queued tasks and 0 free slots (2 busy, 0 idle, 0 pending, min 0, ceiling 4)"},
		{"at the ceiling", pool(Observation{Queued: 9, Unfinished: 13, Busy: 4}), Hold, 0, "at the ceiling: 4 workers for 9 queued tasks"},
		{"a plan's ceiling below the pool's max says both", pool(Observation{Queued: 3, Unfinished: 3, Busy: 1, Max: 2, PoolMax: 8}), Launch, 1,
			"3 queued tasks and 0 free slots (1 busy, 0 idle, 0 pending, min 0, ceiling 2 of max 8)"},
		{"below min launches up to min at once", pool(Observation{Queued: 1, Unfinished: 5, Min: 3}), Launch, 3,
			"below min: 0 live workers (0 busy, 0 idle, 0 pending, min 3, ceiling 4)"},
		{"below min with a longer queue launches what it fills", pool(Observation{Queued: 4, Unfinished: 5, Min: 2, Max: 6}), Launch, 4,
			"below min: 0 live workers, and 4 queued tasks and 0 free slots (0 busy, 0 idle, 0 pending, min 2, ceiling 6)"},
		{"min above max is capped", pool(Observation{Queued: 1, Unfinished: 5, Min: 6, Max: 2}), Launch, 2,
			"below min: 0 live workers (0 busy, 0 idle, 0 pending, min 6, ceiling 2)"},
		{"capacity: one worker takes three", pool(Observation{Queued: 3, Unfinished: 3, Pending: 1, Capacity: 3}), Hold, 0,
			"waiting for 1 pending worker to register"},
		{"free slots of busy workers count", pool(Observation{Queued: 2, Unfinished: 4, Busy: 1, FreeSlots: 2, Capacity: 3}), Hold, 0,
			"2 queued tasks fit the free slots"},
		{"waiting on a dependency: hold", pool(Observation{Queued: 0, Unfinished: 20, Busy: 1}), Hold, 0,
			"every worker is busy and nothing is queued"},
		{"idle, not long enough: hold", pool(Observation{Queued: 0, Unfinished: 3, Busy: 1, Idle: 2, FreeSlots: 2}), Hold, 0,
			"idle workers wait for work"},
		{"long idle above min: drain one", pool(Observation{Queued: 0, Unfinished: 3, Busy: 1, Idle: 2, Drainable: 1, FreeSlots: 2}), Drain, 0,
			"no queued task and 1 idle worker above min (1 busy, 2 idle, 0 pending, min 0, ceiling 4)"},
		{"long idle at min: hold", pool(Observation{Queued: 0, Unfinished: 3, Idle: 2, Drainable: 2, FreeSlots: 2, Min: 2}), Hold, 0, "at min"},
		{"no work left: drain idle at once", pool(Observation{Idle: 2, FreeSlots: 2, Min: 2}), Drain, 0,
			"no work left for the pool (0 busy, 2 idle, 0 pending, min 2, ceiling 4)"},
		{"no work left, nobody idle", pool(Observation{Busy: 1}), Hold, 0, "no work left for the pool"},
		{"a pending worker covers the queue, busy ones full", pool(Observation{Queued: 1, Unfinished: 3, Busy: 2, Pending: 1}), Hold, 0,
			"waiting for 1 pending worker to register"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.o)
			if d.Action != tc.action || d.Count != tc.count || d.Reason != tc.reason {
				t.Errorf("Decide(%+v) = %+v; want %s %d %q", tc.o, d, tc.action, tc.count, tc.reason)
			}
		})
	}
}

func TestInitialWorkers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ workers, min, ready, capacity, want int }{
		{0, 0, 0, 1, 0}, {0, 2, 5, 1, 0}, // no workers planned
		{4, 0, 1, 1, 1}, {4, 0, 3, 1, 3}, {4, 0, 20, 1, 4}, // what the ready tasks fill, up to the ceiling
		{4, 2, 1, 1, 2}, {4, 2, 3, 1, 3}, {2, 5, 0, 1, 2}, // min, capped at the ceiling
		{4, 0, 5, 3, 2}, {4, 0, 6, 3, 2}, {4, 0, 7, 3, 3}, // capacity
		{4, 0, 0, 1, 0}, // everything waits on another pool's task
		{4, 0, 2, 0, 2}, // capacity 0 counts as 1
	} {
		if got := InitialWorkers(tc.workers, tc.min, tc.ready, tc.capacity); got != tc.want {
			t.Errorf("InitialWorkers(%d, %d, %d, %d) = %d, want %d", tc.workers, tc.min, tc.ready, tc.capacity, got, tc.want)
		}
	}
	// At the apply's first step (nothing live, the ready tasks queued) the
	// supervisor launches exactly what the plan said apply starts with.
	for workers := 1; workers <= 5; workers++ {
		for minW := 0; minW <= workers; minW++ {
			for ready := 0; ready <= 12; ready++ {
				for capacity := 1; capacity <= 3; capacity++ {
					d := Decide(Observation{Queued: ready, Unfinished: ready + 1, Min: minW, Max: workers, Capacity: capacity})
					want := InitialWorkers(workers, minW, ready, capacity)
					if d.Count != want {
						t.Errorf("workers %d, min %d, ready %d, capacity %d: the first step launches %d (%s), InitialWorkers says %d",
							workers, minW, ready, capacity, d.Count, d.Action, want)
					}
				}
			}
		}
	}
}

// observation draws a consistent Observation.
func observation(t *rapid.T) Observation {
	o := Observation{
		Capacity: rapid.IntRange(1, 4).Draw(t, "capacity"),
		Max:      rapid.IntRange(1, 12).Draw(t, "max"),
		Busy:     rapid.IntRange(0, 12).Draw(t, "busy"),
		Idle:     rapid.IntRange(0, 12).Draw(t, "idle"),
		Draining: rapid.IntRange(0, 3).Draw(t, "draining"),
		Pending:  rapid.IntRange(0, 12).Draw(t, "pending"),
		Queued:   rapid.IntRange(0, 60).Draw(t, "queued"),
	}
	o.Min = rapid.IntRange(0, o.Max).Draw(t, "min")
	o.Drainable = rapid.IntRange(0, o.Idle).Draw(t, "drainable")
	running := rapid.IntRange(o.Busy, o.Busy*o.Capacity).Draw(t, "running")
	o.FreeSlots = (o.Busy+o.Idle)*o.Capacity - running
	o.Unfinished = o.Queued + running + rapid.IntRange(0, 10).Draw(t, "waiting")
	return o
}

// TestSuperviseProperties: whatever it observes, the supervisor never
// launches past max, never drains below min while work remains, never
// drains a worker that is not idle (it asks for one idle worker, and only
// when there is one), and launches no more than reach min or than the
// queued tasks the free slots leave fill.
func TestSuperviseProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		o := observation(t)
		d := Decide(o)
		live := o.Live()
		switch d.Action {
		case Launch:
			if d.Count < 1 || live+d.Count > o.Max {
				t.Fatalf("launch %d with %d live and max %d", d.Count, live, o.Max)
			}
			free := o.FreeSlots + o.Pending*o.Capacity
			need := max(0, (o.Queued-free+o.Capacity-1)/o.Capacity)
			if d.Count > max(o.Min-live, need) {
				t.Fatalf("launched %d at once: min %d, live %d, %d queued and %d free slots (capacity %d)", d.Count, o.Min, live, o.Queued, free, o.Capacity)
			}
		case Drain:
			if o.Idle == 0 {
				t.Fatalf("drain with no idle worker: %+v", o)
			}
			if o.Unfinished > 0 && (live-1 < o.Min || o.Drainable == 0) {
				t.Fatalf("drain below min %d or of a worker not idle long (live %d, drainable %d) while work remains", o.Min, live, o.Drainable)
			}
		case Hold:
			if d.Count != 0 {
				t.Fatalf("hold with count %d", d.Count)
			}
		default:
			t.Fatalf("unknown action %q", d.Action)
		}
		if d.Reason == "" {
			t.Fatalf("no reason for %+v", d)
		}
		if o.Unfinished > 0 && live < o.Min && d.Action != Launch {
			t.Fatalf("below min (%d < %d) with work, and %s", live, o.Min, d.Action)
		}
	})
}

// TestSuperviseFixedPoint: with a constant queue (workers register one
// tick after their launch and take nothing), the pool stops changing
// after its first step (plus the tick a launch takes to register), and
// stays put.
func TestSuperviseFixedPoint(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 4).Draw(t, "capacity")
		maxW := rapid.IntRange(1, 10).Draw(t, "max")
		minW := rapid.IntRange(0, maxW).Draw(t, "min")
		queued := rapid.IntRange(0, 50).Draw(t, "queued")
		waiting := rapid.IntRange(0, 5).Draw(t, "waiting")
		if queued+waiting == 0 {
			waiting = 1 // work remains
		}
		idle, pending := 0, 0
		settled, changes := -1, 0
		limit := 2
		for tick := 0; tick < limit+10; tick++ {
			o := Observation{Queued: queued, Unfinished: queued + waiting, Idle: idle, Drainable: idle, Pending: pending,
				FreeSlots: idle * capacity, Min: minW, Max: maxW, Capacity: capacity}
			d := Decide(o)
			idle, pending = idle+pending, 0 // last tick's launches register
			switch d.Action {
			case Launch:
				pending += d.Count
				changes++
				settled = -1
			case Drain:
				idle--
				changes++
				settled = -1
			default:
				if settled < 0 {
					settled = tick
				}
			}
		}
		if settled < 0 || settled > limit {
			t.Fatalf("no fixed point within %d ticks (settled at %d, %d changes; max %d, min %d, queued %d, capacity %d)",
				limit, settled, changes, maxW, minW, queued, capacity)
		}
		if want := min(maxW, max(minW, (queued+capacity-1)/capacity)); idle+pending != want {
			t.Fatalf("settled at %d workers, want %d (max %d, min %d, queued %d, capacity %d)", idle+pending, want, maxW, minW, queued, capacity)
		}
	})
}
