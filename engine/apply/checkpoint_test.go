package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/state"
)

// recordingCheckpointer keeps every copy it is given; fail makes Put fail.
type recordingCheckpointer struct {
	dir  string
	puts []string
	fail error
}

func (r *recordingCheckpointer) Put(ctx context.Context, path string) error {
	if r.fail != nil {
		return r.fail
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p := filepath.Join(r.dir, fmt.Sprintf("put-%d.db", len(r.puts)))
	r.puts = append(r.puts, p)
	return os.WriteFile(p, data, 0o600)
}

func tokensOf(t *testing.T, path string) state.TokenReservation {
	t.Helper()
	st, err := state.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Tokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rec := &recordingCheckpointer{dir: t.TempDir()}
	lost := make(chan struct{})
	c := &checkpoints{store: st, put: rec, interval: time.Hour, block: 100, lost: lost, stop: make(chan struct{}), done: make(chan struct{})}
	_, startSerial, _ := st.Info(ctx)

	steps := []struct {
		name         string
		do           func() error
		wantErr      error
		wantPuts     int
		wantReserved int64 // live, and in the last copy put
		wantDue      bool
	}{
		{"nothing reserved yet: due", func() error { return nil }, nil, 0, 0, true},
		{"the first checkpoint reserves a block", func() error { return c.checkpoint(ctx) }, nil, 1, 100, false},
		{"a failed put reserves nothing", func() error {
			rec.fail = errors.New("network down")
			defer func() { rec.fail = nil }()
			return c.checkpoint(ctx)
		}, errors.New("network down"), 1, 100, false},
		{"a lost lock puts nothing", func() error {
			close(lost)
			return c.checkpoint(ctx)
		}, state.ErrLockLost, 1, 100, false},
	}
	for _, s := range steps {
		err := s.do()
		if (err == nil) != (s.wantErr == nil) || (err != nil && !errors.Is(err, s.wantErr) && err.Error() != s.wantErr.Error()) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.wantErr)
		}
		if len(rec.puts) != s.wantPuts {
			t.Fatalf("%s: %d puts, want %d", s.name, len(rec.puts), s.wantPuts)
		}
		live, err := st.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.wantReserved == 0 {
			if live.Reserved {
				t.Fatalf("%s: reserved %+v, want none", s.name, live)
			}
		} else {
			if !live.Reserved || live.ReservedThrough != s.wantReserved {
				t.Fatalf("%s: live reservation %+v, want through %d", s.name, live, s.wantReserved)
			}
			// Every token the live state may grant is reserved in the
			// last copy put: a takeover from it starts past them.
			if got := tokensOf(t, rec.puts[len(rec.puts)-1]); got.ReservedThrough < live.ReservedThrough {
				t.Fatalf("%s: the last copy put reserves through %d, below the live %d", s.name, got.ReservedThrough, live.ReservedThrough)
			}
		}
		if s.name != "a lost lock puts nothing" {
			if got := c.due(ctx); got != s.wantDue {
				t.Fatalf("%s: due = %v, want %v", s.name, got, s.wantDue)
			}
		}
	}
	// The last checkpoint of a lost lock puts nothing either.
	if err := c.final(startSerial); !errors.Is(err, state.ErrLockLost) {
		t.Fatalf("final after a lost lock = %v", err)
	}
}

func TestFinalCheckpointOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rec := &recordingCheckpointer{dir: t.TempDir()}
	c := &checkpoints{store: st, put: rec, interval: time.Hour, block: 100, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	_, startSerial, _ := st.Info(ctx)
	if err := c.final(startSerial); err != nil || len(rec.puts) != 0 {
		t.Fatalf("final of an unchanged state = %v, %d puts; want none", err, len(rec.puts))
	}
	if err := st.AppendEvent(ctx, state.Event{Kind: "probe"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := c.final(startSerial); err != nil || len(rec.puts) != 1 {
		t.Fatalf("final of a changed state = %v, %d puts; want 1", err, len(rec.puts))
	}
}
