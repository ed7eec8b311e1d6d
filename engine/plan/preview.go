package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wdc-dev/wdc/engine/coordinator"
	wdchcl "github.com/wdc-dev/wdc/hcl"
	"github.com/wdc-dev/wdc/providers"
)

// PreviewApplyID stands in for the apply id in a launch preview: the real
// one is made when apply takes the lock, so the names of the objects a
// launch creates (which carry a hash of it) and the apply-id label differ
// at apply.
const PreviewApplyID = "known-after-apply"

// PreviewServerURL stands in for the coordinator's URL in a launch
// preview: apply picks its port when it starts.
const PreviewServerURL = "COORDINATOR-URL-KNOWN-AFTER-APPLY"

// PreviewWorkDir stands in for the agent's work folder in a launch
// preview (apply uses the state's folder; a pod its own).
const PreviewWorkDir = "WORK-FOLDER"

// LaunchPreview is what one launch of a pool would create on its target,
// as its provider renders it (providers.Renderer), for pools whose
// provider creates objects (a Kubernetes Job, Secret and Lease; a Ray job
// submission).
type LaunchPreview struct {
	Pool     string
	Provider string
	// Objects are the provider's rendered objects, in creation order, with
	// every secret value shown as "(sensitive)".
	Objects []providers.RenderedObject
}

// LaunchRequestFor returns the request apply would make for launch seq of
// pool p, with PreviewApplyID, PreviewServerURL and no credential: what
// `wdc plan`, its cluster check and `wdc workers render-launch` render.
func LaunchRequestFor(p *wdchcl.Pool, lineage string, seq int) providers.LaunchRequest {
	req := providers.LaunchRequest{
		Pool: p.Name, Lineage: cmp.Or(lineage, "new-state"), ApplyID: PreviewApplyID, Seq: seq,
		ServerURL: PreviewServerURL, Credential: "(sensitive)", Executable: "wdc", WorkDir: PreviewWorkDir,
		DrainTimeout: p.DrainTimeout, Unconfined: p.Unconfined, HeartbeatTTL: cmp.Or(p.Heartbeat.TTL, coordinator.DefaultTTL),
		LogPath:  filepath.Join("(work folder)", "workers", "(apply start)", fmt.Sprintf("%s-%d.log", p.Name, seq)),
		Settings: p.Settings,
	}
	return req
}

// PreviewOptions configure PreviewLaunches.
type PreviewOptions struct {
	// ClusterCheck submits each rendered launch to its target with a dry
	// run (providers.DryRunner), which creates nothing: refusals become
	// error diagnostics on the pool's provider block, an unreachable
	// target a warning.
	ClusterCheck bool
	// Timeout bounds each dry run (default 20 s).
	Timeout time.Duration
}

// PreviewLaunches renders the first launch of every pool of cfg whose
// plan launches workers and whose provider creates objects on its target,
// and, with ClusterCheck, asks the target whether it would accept it. It
// never creates anything. The plan itself stays a pure computation: this
// runs after it.
func PreviewLaunches(ctx context.Context, cfg *wdchcl.Config, plan *Plan, opts PreviewOptions) ([]LaunchPreview, hcl.Diagnostics) {
	var out []LaunchPreview
	var diags hcl.Diagnostics
	workers := map[string]int{}
	for _, pc := range plan.Pools {
		workers[pc.Name] = pc.Workers
	}
	for _, p := range cfg.Pools {
		if p.Provider == providers.External || workers[p.Name] == 0 {
			continue
		}
		prov, err := providers.Lookup(p.Provider)
		if err != nil {
			continue // validation reported it
		}
		req := LaunchRequestFor(p, plan.Lineage, 1)
		r, err := providers.RenderLaunch(ctx, prov, req)
		if errors.Is(err, providers.ErrNotSupported) {
			continue
		}
		subject := poolSubject(p)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot render the launch",
				Detail: fmt.Sprintf("Pool %q: %v", p.Name, err), Subject: subject})
			continue
		}
		if len(r.Objects) == 0 {
			continue
		}
		out = append(out, LaunchPreview{Pool: p.Name, Provider: p.Provider, Objects: r.Objects})
		if !opts.ClusterCheck {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, cmp.Or(opts.Timeout, 20*time.Second))
		resp, err := providers.DryRun(dctx, prov, req)
		cancel()
		switch {
		case errors.Is(err, providers.ErrNotSupported):
		case errors.Is(err, providers.ErrUnreachable):
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Cluster check skipped",
				Detail:  fmt.Sprintf("Pool %q: the cluster could not be reached, so the launch was not checked against it: %v. (--no-cluster-check skips the check.)", p.Name, err),
				Subject: subject})
		case err != nil:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "The cluster refuses the launch",
				Detail:  fmt.Sprintf("Pool %q: a server-side dry run of its first launch was refused, so apply's launches would be too: %v", p.Name, err),
				Subject: subject})
		default:
			for _, w := range resp.Warnings {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "The cluster warns about the launch",
					Detail: fmt.Sprintf("Pool %q: %s", p.Name, w), Subject: subject})
			}
		}
	}
	return out, diags
}

// poolSubject is where a diagnostic about a pool's launches points: its
// provider block, else the pool.
func poolSubject(p *wdchcl.Pool) *hcl.Range {
	r := p.DeclRange
	if p.Settings != nil {
		r = p.Settings.BlockRange()
	}
	return &r
}
