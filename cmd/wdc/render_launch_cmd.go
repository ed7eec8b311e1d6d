package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/providers"
)

// WorkersRenderLaunchCmd prints what one launch of a pool would create on
// its target, as the pool's provider renders it: for kubernetes, the
// Secret (its data shown as "(sensitive)"), the Lease and the Job as YAML
// documents (sigs.k8s.io/yaml), for kubectl or a review. It reads the
// state's lineage when there is a state, and changes nothing anywhere.
type WorkersRenderLaunchCmd struct {
	Pool string    `arg:"" help:"The pool (NAME or pool.NAME)."`
	Seq  launchSeq `name:"seq" default:"1" placeholder:"N" help:"The launch sequence to render: which launch of the pool within one apply, 1 for its first, 2 for the next (a whole number from 1)."`
}

// launchSeq is a launch sequence on the command line: which launch of a
// pool within one apply (1 for its first, 2 for the next, …), as a
// launch's names and its worker's registration carry it. Its mapper takes
// the next word whatever it looks like, so that --seq -1 is refused by
// saying what a launch sequence is, not as a flag where a value belongs.
type launchSeq int

// Decode reads the flag's value: a whole number from 1.
func (s *launchSeq) Decode(ctx *kong.DecodeContext) error {
	t := ctx.Scan.Pop()
	if t.IsEOL() {
		return errors.New("expected a launch sequence: which launch of the pool within one apply, a whole number from 1 (1 for its first launch)")
	}
	text := fmt.Sprint(t.Value)
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a launch sequence: it numbers the launches of a pool within one apply, 1 for its first, 2 for the next, so it is a whole number from 1", text)
	}
	*s = launchSeq(n)
	return nil
}

// Run renders the launch. Errors: an unknown pool, a pool whose provider
// cannot render a launch (local prints its command line instead), a
// configuration that does not validate.
func (c *WorkersRenderLaunchCmd) Run(e *env) error {
	ctx := context.Background()
	cfg, err := e.loadConfig()
	if err != nil {
		return err
	}
	if diags := plan.Validate(cfg); diags.HasErrors() {
		e.printDiags(cfg, diags)
		return errExit{1}
	}
	name := strings.TrimPrefix(c.Pool, "pool.")
	for _, p := range cfg.Pools {
		if p.Name != name {
			continue
		}
		if p.Provider == providers.External {
			return fmt.Errorf("pool %s is external: apply launches nothing for it (its workers join with wdc agent --join-file)", name)
		}
		prov, err := providers.Lookup(p.Provider)
		if err != nil {
			return fmt.Errorf("pool %s: %w", name, err)
		}
		lineage := ""
		if path, err := e.readingPath(cfg); err == nil {
			if snap, err := readSnapshot(ctx, path); err == nil {
				lineage = snap.Lineage
			}
		}
		r, err := providers.RenderLaunch(ctx, prov, plan.LaunchRequestFor(p, lineage, int(c.Seq)))
		if errors.Is(err, providers.ErrNotSupported) {
			return fmt.Errorf("pool %s: %w", name, err)
		}
		if err != nil {
			return fmt.Errorf("pool %s: %w", name, err)
		}
		if len(r.Objects) == 0 {
			_, err := fmt.Fprintf(e.stdout, "# pool %s (%s) creates no objects: each launch runs\n# %s\n", name, p.Provider, strings.Join(r.Argv, " "))
			return err
		}
		fmt.Fprintf(e.stdout, "# Launch %d of pool %s (%s). Names, labels and metadata that carry the apply id show %s, and the\n# agent's --server shows %s: apply makes both when it starts.\n", c.Seq, name, p.Provider, plan.PreviewApplyID, plan.PreviewServerURL)
		for i, o := range r.Objects {
			if i > 0 {
				fmt.Fprintln(e.stdout, "---")
			}
			fmt.Fprint(e.stdout, o.Body)
		}
		return nil
	}
	return fmt.Errorf("no pool %q in the configuration", name)
}
