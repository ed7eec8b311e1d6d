package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/engine"
	"github.com/wdc-dev/wdc/state"
)

// LogsCmd prints an attempt's stdout or stderr from the work folder's
// artifact store.
type LogsCmd struct {
	Address string `arg:"" name:"address" predictor:"address" help:"Task address (task.NAME, task.NAME[INDEX]) or bare name."`
	Attempt int    `name:"attempt" placeholder:"N" help:"Which attempt (default: the latest)."`
	Stderr  bool   `name:"stderr" help:"Print stderr instead of stdout."`
}

// Run prints the log exactly as the attempt wrote it (the bytes its
// accepted result bound), never redacted: a log is whatever the command
// printed.
func (c *LogsCmd) Run(e *env) error {
	ctx := context.Background()
	path, err := e.statePathForReading()
	if err != nil {
		return err
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return err
	}
	addr := normalizeAddress(c.Address)
	if st == nil {
		return fmt.Errorf("no task %s: there is no state file at %s", addr, path)
	}
	defer st.Close()
	if _, err := st.Task(ctx, addr); err != nil {
		return fmt.Errorf("no task %s in the state %s (see wdc tasks list)", addr, path)
	}
	attempts, err := st.Attempts(ctx, addr)
	if err != nil {
		return err
	}
	if len(attempts) == 0 {
		return fmt.Errorf("%s has no attempt yet", addr)
	}
	a := attempts[len(attempts)-1]
	if c.Attempt != 0 {
		if c.Attempt < 1 || c.Attempt > len(attempts) {
			return fmt.Errorf("%s has attempts 1 to %d, not %d", addr, len(attempts), c.Attempt)
		}
		a = attempts[c.Attempt-1]
	}
	name := "stdout"
	if c.Stderr {
		name = "stderr"
	}
	for _, x := range a.Artifacts {
		if x.Kind == state.ArtifactLog && x.Name == name {
			store, err := artifact.OpenForReading(engine.ArtifactFolder(filepath.Dir(path)))
			if err != nil {
				return err
			}
			f, _, err := store.Open(x.SHA256)
			if err != nil {
				return fmt.Errorf("the %s of %s attempt %d (blob %s) is not in the work folder's artifact store (wdc gc removes the blobs of replaced definitions): %w", name, addr, a.Number, x.SHA256, err)
			}
			defer f.Close()
			_, err = io.Copy(e.stdout, f)
			return err
		}
	}
	legacy := map[string]string{"stdout": a.StdoutPath, "stderr": a.StderrPath}[name]
	switch {
	case legacy != "":
		f, err := os.Open(legacy)
		if err != nil {
			return fmt.Errorf("%s attempt %d was recorded by an earlier version with its %s at %s: %w", addr, a.Number, name, legacy, err)
		}
		defer f.Close()
		_, err = io.Copy(e.stdout, f)
		return err
	case a.EndedAt.IsZero():
		return fmt.Errorf("%s attempt %d is still running: its logs arrive with its result", addr, a.Number)
	default:
		return fmt.Errorf("%s attempt %d has no %s: it ended without running its command (%s)", addr, a.Number, name, orDash(a.Error))
	}
}
