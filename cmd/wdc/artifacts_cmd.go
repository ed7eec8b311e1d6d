package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/state"
)

// ArtifactsCmd groups the commands that read a task's outputs back.
type ArtifactsCmd struct {
	List ArtifactsListCmd `cmd:"" help:"List the outputs of a task's attempt: name, size, SHA-256, media type."`
	Get  ArtifactsGetCmd  `cmd:"" help:"Print one output of a task's attempt (or write it with -o FILE), byte for byte."`
}

// artifactTarget selects the attempt whose outputs the artifacts commands
// read.
type artifactTarget struct {
	Address string `arg:"" name:"address" predictor:"address" help:"Task address (task.NAME, task.NAME[INDEX]) or bare name."`
	Attempt int    `name:"attempt" placeholder:"N" help:"Which attempt (default: the latest one whose result was accepted with outputs, else the latest)."`
}

// attemptOutputs finds the attempt and its outputs, and the store that
// holds their blobs.
func (e *env) attemptOutputs(t artifactTarget) (state.Attempt, []state.Artifact, *artifact.Store, error) {
	ctx := context.Background()
	path, err := e.statePathForReading()
	if err != nil {
		return state.Attempt{}, nil, nil, err
	}
	st, err := openForReading(ctx, path)
	if err != nil {
		return state.Attempt{}, nil, nil, err
	}
	addr := normalizeAddress(t.Address)
	if st == nil {
		return state.Attempt{}, nil, nil, fmt.Errorf("no task %s: there is no state file at %s", addr, path)
	}
	defer st.Close()
	if _, err := st.Task(ctx, addr); err != nil {
		if snap, serr := st.Snapshot(ctx); serr == nil {
			return state.Attempt{}, nil, nil, unknownTask(snap, path, addr, "wdc artifacts list")
		}
		return state.Attempt{}, nil, nil, fmt.Errorf("no task %s in the state %s (see wdc tasks list)", addr, path)
	}
	attempts, err := st.Attempts(ctx, addr)
	if err != nil {
		return state.Attempt{}, nil, nil, err
	}
	if len(attempts) == 0 {
		return state.Attempt{}, nil, nil, fmt.Errorf("%s has no attempt yet", addr)
	}
	var a state.Attempt
	switch {
	case t.Attempt != 0:
		if a, err = attemptNumbered(addr, attempts, t.Attempt); err != nil {
			return state.Attempt{}, nil, nil, err
		}
	default:
		a = attempts[len(attempts)-1]
		for i := len(attempts) - 1; i >= 0; i-- {
			if outputsOf(attempts[i]) != nil {
				a = attempts[i]
				break
			}
		}
	}
	var hashes []string
	for _, x := range outputsOf(a) {
		hashes = append(hashes, x.SHA256)
	}
	store, err := e.blobStore(ctx, path, hashes...)
	if err != nil && outputsOf(a) != nil {
		return state.Attempt{}, nil, nil, err
	}
	return a, outputsOf(a), store, nil
}

func outputsOf(a state.Attempt) []state.Artifact {
	var out []state.Artifact
	for _, x := range a.Artifacts {
		if x.Kind == state.ArtifactOutput {
			out = append(out, x)
		}
	}
	return out
}

// ArtifactsListCmd lists an attempt's outputs.
type ArtifactsListCmd struct {
	artifactTarget
	JSON bool `name:"json" help:"Print a JSON array."`
}

// Run prints the outputs the attempt's accepted result bound.
func (c *ArtifactsListCmd) Run(e *env) error {
	a, outs, _, err := e.attemptOutputs(c.artifactTarget)
	if err != nil {
		return err
	}
	if c.JSON {
		return views.WriteJSON(e.stdout, views.NewArtifactsJSON(outs))
	}
	if len(outs) == 0 {
		_, err := fmt.Fprintf(e.stdout, "%s attempt %d has no outputs.\n", normalizeAddress(c.Address), a.Number)
		return err
	}
	tw := views.NewTable(e.stdout)
	fmt.Fprintln(tw, "NAME\tSIZE\tSHA256\tMEDIA TYPE")
	for _, o := range outs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", views.Printable(o.Name), artifact.FormatSize(o.Size), o.SHA256, views.OrDash(views.Printable(o.MediaType)))
	}
	return tw.Flush()
}

// ArtifactsGetCmd prints or writes one output.
type ArtifactsGetCmd struct {
	artifactTarget
	Name string `arg:"" name:"name" help:"The output's name, as wdc artifacts list shows it (its path in the attempt's directory)."`
	Out  string `name:"out" short:"o" placeholder:"FILE" help:"Write it to FILE (replaced atomically) instead of stdout."`
}

// Run copies the output's blob, byte for byte, to stdout or -o FILE.
func (c *ArtifactsGetCmd) Run(e *env) error {
	a, outs, store, err := e.attemptOutputs(c.artifactTarget)
	if err != nil {
		return err
	}
	for _, o := range outs {
		if o.Name != c.Name {
			continue
		}
		f, _, err := store.Open(o.SHA256)
		if err != nil {
			return fmt.Errorf("output %s of %s attempt %d (blob %s) is not in the work folder's artifact store (wdc gc removes the blobs of replaced definitions): %w", o.Name, normalizeAddress(c.Address), a.Number, o.SHA256, err)
		}
		defer f.Close()
		if c.Out == "" {
			_, err = io.Copy(e.stdout, f)
			return err
		}
		if fi, err := os.Stat(c.Out); err == nil && fi.IsDir() {
			return fmt.Errorf("-o %s is a folder: name the file to write, e.g. -o %s", c.Out, filepath.Join(c.Out, path.Base(o.Name)))
		}
		if err := os.MkdirAll(filepath.Dir(c.Out), 0o755); err != nil {
			return fmt.Errorf("-o %s: creating its folder: %w", c.Out, err)
		}
		pf, err := renameio.NewPendingFile(c.Out, renameio.WithPermissions(0o644))
		if err != nil {
			return fmt.Errorf("-o %s: %w", c.Out, pathCause(err))
		}
		defer pf.Cleanup() //nolint:errcheck // after CloseAtomicallyReplace it does nothing
		if _, err := io.Copy(pf, f); err != nil {
			return fmt.Errorf("writing %s: %w", c.Out, err)
		}
		if err := pf.CloseAtomicallyReplace(); err != nil {
			return fmt.Errorf("writing %s: %w", c.Out, pathCause(err))
		}
		return nil
	}
	names := make([]string, len(outs))
	for i, o := range outs {
		names[i] = o.Name
	}
	return fmt.Errorf("%s attempt %d has no output %q (outputs: %s)", normalizeAddress(c.Address), a.Number, c.Name, views.OrDash(strings.Join(names, ", ")))
}

// pathCause strips the path of a file system error (a temporary file's,
// which means nothing to the user) down to its cause.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
