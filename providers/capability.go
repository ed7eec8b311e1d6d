package providers

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotSupported means a provider cannot do what was asked: it has no
// such capability (RenderLaunch and DryRun of a provider that is no
// Renderer or DryRunner), or its launch target cannot (a cluster that
// refuses dry runs).
var ErrNotSupported = errors.New("not supported by the provider")

// Renderer is implemented by providers that can show the launch they
// would make without making it (Capabilities.Render): `wdc plan` can show
// it, and a reviewer sees what apply would create.
type Renderer interface {
	// RenderLaunch returns what launching req would create. It must not
	// change anything on the launch target, and no secret value (the
	// launch credential, a secret environment value) may be in its
	// response.
	RenderLaunch(ctx context.Context, req LaunchRequest) (RenderResponse, error)
}

// RenderResponse is what a launch would create, for people to review.
type RenderResponse struct {
	// Argv is the command line the worker would run (Render(req)); the
	// credential is never on it.
	Argv []string
	// Env names the environment variables the provider would set for the
	// worker, on top of what the worker inherits, sorted. Values are left
	// out: one of them is the launch credential.
	Env []string
	// Objects are what the launch would create on its target besides the
	// command, in the order it would create them: a Kubernetes provider's
	// Job and Lease, a Ray provider's job submission. The local provider
	// creates none (a process runs Argv).
	Objects []RenderedObject
}

// RenderedObject is one object a launch would create on its target.
type RenderedObject struct {
	// Kind is the object's kind in the target's words ("Job", "Lease",
	// "JobSubmission").
	Kind string
	// Name is the name it would get.
	Name string
	// Body is the object as the provider would send it (YAML or JSON),
	// with every secret value replaced by "(sensitive)".
	Body string
}

// DryRunner is implemented by providers that can check a launch against
// their target without launching anything (Capabilities.DryRun), such as
// a Kubernetes server-side dry run that runs admission, quota and RBAC.
type DryRunner interface {
	// DryRunLaunch asks the launch target whether it would accept req,
	// creating nothing. It returns an error saying why not when the
	// target would refuse it, and one wrapping ErrNotSupported when the
	// target cannot check without launching.
	DryRunLaunch(ctx context.Context, req LaunchRequest) (DryRunResponse, error)
}

// DryRunResponse is a launch target's answer to a dry run that it would
// accept.
type DryRunResponse struct {
	// Warnings are what the target said about the launch while accepting
	// it (a deprecated field, a default it filled in).
	Warnings []string
}

// RenderLaunch returns what p would create to launch req, through its
// Renderer; for a provider that is not one, an error wrapping
// ErrNotSupported.
func RenderLaunch(ctx context.Context, p Provider, req LaunchRequest) (RenderResponse, error) {
	r, ok := p.(Renderer)
	if !ok {
		return RenderResponse{}, fmt.Errorf("%w: provider %q cannot show a launch without making it", ErrNotSupported, p.Name())
	}
	return r.RenderLaunch(ctx, req)
}

// DryRun asks p's launch target whether it would accept req, through
// p's DryRunner; for a provider that is not one (local: a process has
// nothing to check it against), an error wrapping ErrNotSupported.
func DryRun(ctx context.Context, p Provider, req LaunchRequest) (DryRunResponse, error) {
	d, ok := p.(DryRunner)
	if !ok {
		return DryRunResponse{}, fmt.Errorf("%w: provider %q cannot check a launch without making it", ErrNotSupported, p.Name())
	}
	return d.DryRunLaunch(ctx, req)
}

// ErrUnreachable means a provider could not reach its launch target to
// ask (no kubeconfig, a refused connection, a timeout): unlike a refusal,
// it says nothing about the launch. `wdc plan` shows it as a warning.
var ErrUnreachable = errors.New("launch target unreachable")
