package apply

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"

	"github.com/wdc-dev/wdc/providers"
	"github.com/wdc-dev/wdc/state"
)

// ReclaimResult says what ReclaimStrays stopped.
type ReclaimResult struct {
	// Stopped counts the workers of dead applies that were stopped;
	// OrphanWorkers those stopped that no launch record named;
	// OrphanAttempts the attempts stopped whose worker was gone (attempt
	// process groups).
	Stopped, OrphanWorkers, OrphanAttempts int
}

// ReclaimStrays stops what applies other than applyID launched and never
// saw gone, under the apply lock (the caller holds it, so no other apply's
// worker is legitimate): the launches are grouped by provider, and each
// provider stops them its own way (providers.Provider.Reclaim), by what it
// recorded or labelled at launch, given the records and the ids of the
// applies that never ended (never by what a worker reported about
// itself). Launches its provider found stopped or gone are closed in the
// state. settings are the provider blocks of the configuration's pools by
// provider (ProviderSettings): where a provider that labels what it
// creates looks for it. Errors: state errors; a provider's failure is
// returned after the others ran.
func ReclaimStrays(ctx context.Context, store *state.Store, workDir, applyID string, settings map[string][]wdchcl.ProviderSettings, now time.Time) (ReclaimResult, error) {
	var res ReclaimResult
	byProvider, order, lineage, dead, err := strays(ctx, store, applyID, settings)
	if err != nil {
		return res, err
	}
	var firstErr error
	for _, name := range order {
		prov, err := providers.Lookup(name)
		if err != nil {
			continue // a provider this build lacks: nothing it can stop
		}
		resp, err := prov.Reclaim(ctx, providers.ReclaimRequest{WorkDir: workDir, Launches: byProvider[name], ApplyIDs: dead,
			Lineage: lineage, Settings: settings[name]})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("provider %s: stopping what an earlier apply left: %w", name, err)
			}
			continue
		}
		res.Stopped += len(resp.Stopped)
		res.OrphanWorkers += resp.OrphanWorkers
		res.OrphanAttempts += resp.OrphanAttempts
		ended := map[[2]string][]int{}
		for _, l := range append(resp.Stopped, resp.Gone...) {
			k := [2]string{l.ApplyID, l.Pool}
			ended[k] = append(ended[k], l.Seq)
		}
		for k, seqs := range ended {
			if err := store.EndLaunches(ctx, k[0], k[1], seqs, now); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return res, firstErr
}

// Leftover is one thing an apply other than the current one left running,
// as its provider found it (FindLeftovers).
type Leftover struct {
	Provider string // the provider that found it, e.g. "local"
	providers.Leftover
}

// FindLeftovers lists, stopping nothing and writing nothing, what
// ReclaimStrays would stop for the same arguments: each provider that
// implements providers.LeftoverFinder lists what it finds of the open
// launches of applies other than applyID ("" for every apply), and of
// what the dead applies labelled, where settings (ProviderSettings) say to
// look. Errors: state errors; a provider's failure is returned after the
// others ran.
func FindLeftovers(ctx context.Context, store *state.Store, workDir, applyID string, settings map[string][]wdchcl.ProviderSettings) ([]Leftover, error) {
	byProvider, order, lineage, dead, err := strays(ctx, store, applyID, settings)
	if err != nil {
		return nil, err
	}
	var out []Leftover
	var firstErr error
	for _, name := range order {
		prov, err := providers.Lookup(name)
		if err != nil {
			continue // a provider this build lacks: nothing it can find
		}
		lf, ok := prov.(providers.LeftoverFinder)
		if !ok {
			continue
		}
		resp, err := lf.FindLeftovers(ctx, providers.ReclaimRequest{WorkDir: workDir, Launches: byProvider[name], ApplyIDs: dead,
			Lineage: lineage, Settings: settings[name]})
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("provider %s: finding what an earlier apply left: %w", name, err)
			}
			continue
		}
		for _, l := range resp.Leftovers {
			out = append(out, Leftover{Provider: name, Leftover: l})
		}
	}
	return out, firstErr
}

// strays gathers what ReclaimStrays and FindLeftovers hand the providers:
// the open launches of applies other than applyID by provider, the
// providers to ask (those of the launches, "local", and those with
// settings), the state's lineage and the applies other than applyID that
// did not end by releasing the lock.
func strays(ctx context.Context, store *state.Store, applyID string, settings map[string][]wdchcl.ProviderSettings) (map[string][]providers.LaunchRecord, []string, string, []string, error) {
	byProvider, order, err := openLaunchesByProvider(ctx, store, applyID)
	if err != nil {
		return nil, nil, "", nil, err
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
	}
	lineage, _, err := store.Info(ctx)
	if err != nil {
		return nil, nil, "", nil, err
	}
	applies, err := store.Applies(ctx)
	if err != nil {
		return nil, nil, "", nil, err
	}
	var dead []string
	for _, ap := range applies {
		if ap.ID != applyID && ap.EndReason != "released" {
			dead = append(dead, ap.ID)
		}
	}
	return byProvider, order, lineage, dead, nil
}

// ProviderSettings returns the settings of cfg's pools (hcl.Pool.Settings)
// by provider name, as ReclaimStrays and FindLeftovers take them; nil for
// a nil cfg.
func ProviderSettings(cfg *wdchcl.Config) map[string][]wdchcl.ProviderSettings {
	if cfg == nil {
		return nil
	}
	out := map[string][]wdchcl.ProviderSettings{}
	for _, p := range cfg.Pools {
		if p.Settings != nil {
			out[p.Provider] = append(out[p.Provider], p.Settings)
		}
	}
	return out
}

// openLaunchesByProvider reads the open launches of applies other than
// applyID and groups them by provider, in the order providers first
// appear; "local" is always among them (its attempt groups need no launch
// record).
func openLaunchesByProvider(ctx context.Context, store *state.Store, applyID string) (map[string][]providers.LaunchRecord, []string, error) {
	open, err := store.OpenLaunches(ctx, applyID)
	if err != nil {
		return nil, nil, err
	}
	byProvider := map[string][]providers.LaunchRecord{}
	var order []string
	for _, l := range open {
		if _, ok := byProvider[l.Provider]; !ok {
			order = append(order, l.Provider)
		}
		byProvider[l.Provider] = append(byProvider[l.Provider], providers.LaunchRecord{
			ApplyID: l.ApplyID, Pool: l.Pool, Seq: l.Seq, ID: l.Process.Handle, Host: l.Process.Host, PID: l.Process.PID,
			ProcessStart: l.Process.Start, Argv: l.Process.Argv, WorkDir: l.Process.WorkDir,
		})
	}
	if _, ok := byProvider["local"]; !ok {
		// Orphaned attempt groups of local agents need no launch record.
		order = append(order, "local")
	}
	return byProvider, order, nil
}
