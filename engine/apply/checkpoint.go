package apply

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/state"
)

// Checkpointer puts consistent copies of an apply's state where they
// outlive this machine (a backend's store). Operation.Checkpoints uses it.
type Checkpointer interface {
	// Put uploads the state file at path, a complete and consistent copy,
	// in place of the one it put before, whole or not at all. An error
	// is tried again at the next checkpoint; when a Put can never succeed
	// (another writer replaced the state, the outer lock is lost) the
	// implementation also closes Operation.Fence, which stops the apply.
	Put(ctx context.Context, path string) error
}

// Checkpoint defaults (Operation.CheckpointInterval, TokenBlock).
const (
	// DefaultCheckpointInterval: at most one checkpoint this often while
	// the state changes (and one at the end).
	DefaultCheckpointInterval = 5 * time.Second
	// DefaultTokenBlock is how many fencing tokens each checkpoint
	// reserves past the last one granted. A checkpoint is made early when
	// half of the block is used.
	DefaultTokenBlock = 10000
)

// EventCheckpointFailed: a checkpoint could not be put (Message: why); it
// is tried again at the next one. Grants go on within the tokens the last
// checkpoint put reserved.
const EventCheckpointFailed = "checkpoint_failed"

// checkpoints makes the checkpoints of one apply: consistent copies of
// the state file (state.Copy) in which the fencing tokens are reserved
// through the last one granted plus a block, put by the Checkpointer; the
// live state grants only tokens that a checkpoint put had reserved, so
// that an apply taking over from the last checkpoint starts past every
// token this one granted (state.SkipReservedTokens).
type checkpoints struct {
	store    *state.Store
	put      Checkpointer
	interval time.Duration
	block    int64
	lost     <-chan struct{} // the apply's lock was lost: put nothing more
	onFail   func(error)

	mu       sync.Mutex // one checkpoint at a time
	puts     int        // checkpoints put
	serial   int64      // the serial of the last one put
	lastPut  time.Time  // wall clock
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// checkpoint makes one checkpoint now, unless the lock was lost.
func (c *checkpoints) checkpoint(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.lost:
		return state.ErrLockLost
	default:
	}
	dir, err := os.MkdirTemp(filepath.Dir(c.store.Path()), ".checkpoint-")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	if err := state.Copy(ctx, c.store.Path(), path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	through, serial, err := reserveInCopy(ctx, path, c.block)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := c.put.Put(ctx, path); err != nil {
		return err
	}
	// Put: from now on the live state may grant the tokens it reserved.
	if err := c.store.ReserveTokens(ctx, through); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	c.puts++
	c.serial, c.lastPut = serial, time.Now()
	return nil
}

// reserveInCopy reserves, in the copy at path, the fencing tokens through
// its last one plus block (never less than it reserved), and returns that
// and the copy's serial. The copy is then closed, complete.
func reserveInCopy(ctx context.Context, path string, block int64) (through, serial int64, err error) {
	st, err := state.Open(ctx, path)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
		for _, side := range []string{"-wal", "-shm", "-writers"} {
			os.Remove(path + side)
		}
	}()
	r, err := st.Tokens(ctx)
	if err != nil {
		return 0, 0, err
	}
	through = max(r.LastToken+block, r.ReservedThrough)
	if err := st.ReserveTokens(ctx, through); err != nil {
		return 0, 0, err
	}
	_, serial, err = st.Info(ctx)
	return through, serial, err
}

// due reports whether a checkpoint is due: the state changed since the
// last one put and the interval has passed, or half of the reserved block
// is used (grants would soon wait for one).
func (c *checkpoints) due(ctx context.Context) bool {
	r, err := c.store.Tokens(ctx)
	if err != nil {
		return false
	}
	if !r.Reserved || r.ReservedThrough-r.LastToken < c.block/2 {
		return true
	}
	_, serial, err := c.store.Info(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	return err == nil && serial != c.serial && time.Since(c.lastPut) >= c.interval
}

// run checkpoints, on the wall clock, until stopped: it looks every
// second (or every interval, when shorter) whether one is due.
func (c *checkpoints) run() {
	defer close(c.done)
	t := time.NewTicker(min(time.Second, c.interval))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.lost:
			return
		case <-t.C:
			if !c.due(context.Background()) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := c.checkpoint(ctx); err != nil && c.onFail != nil {
				c.onFail(err)
			}
			cancel()
		}
	}
}

// halt stops run and waits for it.
func (c *checkpoints) halt() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

// final makes the last checkpoint (tried three times), when a checkpoint
// was put during the apply or the state changed since startSerial; a lost
// lock puts nothing.
func (c *checkpoints) final(startSerial int64) error {
	_, serial, err := c.store.Info(context.Background())
	if err != nil {
		return err
	}
	c.mu.Lock()
	needed := c.puts > 0 || serial != startSerial
	c.mu.Unlock()
	if !needed {
		return nil
	}
	for try := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err = c.checkpoint(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.lost:
			return err
		default:
		}
		if try < 2 {
			if c.onFail != nil {
				c.onFail(err)
			}
			time.Sleep(time.Duration(try+1) * time.Second)
		}
	}
	return fmt.Errorf("%w: %w", ErrCheckpointFailed, err)
}

// ErrCheckpointFailed: the last checkpoint could not be put; the state
// file keeps what the apply did.
var ErrCheckpointFailed = errors.New("the last checkpoint failed")

// checkpointFailedEvent is the event of a checkpoint that could not be
// put.
func checkpointFailedEvent(err error, now time.Time) coordinator.Event {
	return coordinator.Event{Kind: EventCheckpointFailed, At: now, Message: err.Error() + " (tried again at the next checkpoint)"}
}
