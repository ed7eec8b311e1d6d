package providers

import (
	"context"
	"errors"
	"time"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// Provider launches, watches and stops workers (`wdc agent` processes) on
// one kind of launch target. Calls take a request struct and return a
// response struct, so fields can be added without breaking providers.
// Implementations must be safe for concurrent use.
type Provider interface {
	// Name is the provider's name as pools write it: "local", "ray", …
	Name() string
	// Launch starts one worker and returns once the target has accepted it
	// (for local: the process has started). It returns an error, and
	// nothing is running, if it could not.
	Launch(ctx context.Context, req LaunchRequest) (LaunchResponse, error)
	// Stop asks a worker to stop. Without Kill it is a drain: the agent
	// gets SIGTERM (or the target's equivalent), stops claiming, finishes
	// or kills its attempts within its drain timeout, posts their results
	// and exits; Stop returns once the request is delivered. With Kill the
	// worker is killed at once and Stop returns once it is gone (or ctx is
	// done). Stopping a worker that already exited is not an error.
	Stop(ctx context.Context, req StopRequest) error
	// Status reports whether a worker is still running and, once it has
	// exited and the provider knows, its exit code.
	Status(ctx context.Context, req StatusRequest) (StatusResponse, error)
	// Wait blocks until the worker has ended and reports how: the
	// provider's event for a worker's end (a process reaped, a pod or job
	// finished). Apply calls it once per launch, in its own goroutine, and
	// revokes the worker's leases as lost the moment it returns, so it must
	// not return while the worker may still run. It returns ctx's error
	// when ctx is done first.
	Wait(ctx context.Context, req WaitRequest) (WaitResponse, error)
	// Cleanup removes what a worker that ended left behind (the local
	// provider kills the process groups its attempts left running: a
	// killed agent takes only its direct children with it). Apply calls it
	// for every worker that ended. Nothing to clean is not an error.
	Cleanup(ctx context.Context, req CleanupRequest) error
	// Reclaim stops what applies that died left running: apply calls it
	// when it takes over a dead apply's lock, with the launches those
	// applies recorded and never saw gone and their apply ids. A provider
	// stops only what those records or ids name (what it recorded or
	// labelled at launch, never what a worker reported about itself), in
	// its own way: the local provider kills a process only when its pid,
	// start time, command line and work folder all match the record.
	Reclaim(ctx context.Context, req ReclaimRequest) (ReclaimResponse, error)
}

// WaitRequest names the worker to wait for.
type WaitRequest struct {
	// ID is a LaunchResponse.ID.
	ID string
}

// WaitResponse says how a worker ended.
type WaitResponse struct {
	// ExitCode is the worker's exit code, when it exited by itself and the
	// provider knows it; nil otherwise.
	ExitCode *int
	// Signal names the signal that ended it ("SIGKILL"), or "".
	Signal string
	// Reason says how it ended in the provider's words, for messages:
	// "exited with status 3", "was killed by SIGKILL", "pod evicted: …".
	Reason string
	// Permanent says the worker could not start for a reason another
	// launch of the same pool would meet again (its executable is not in
	// the image, its image cannot be had): apply fails the pool at once
	// instead of launching again.
	Permanent bool
}

// ErrPermanent marks a launch error another launch of the same pool would
// meet again (a head that refuses the agent's package, a binary for another
// system): apply fails the pool at once instead of launching again.
// Permanent marks an error so without changing its message.
var ErrPermanent = errors.New("no other launch would do better")

// Permanent returns err marked as ErrPermanent (errors.Is), its message
// unchanged; nil for nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string        { return e.err.Error() }
func (e permanentError) Unwrap() error        { return e.err }
func (e permanentError) Is(target error) bool { return target == ErrPermanent }

// LeftoverFinder is implemented by providers that can list, stopping
// nothing, what Reclaim would stop for the same request: `wdc doctor`
// shows it. It must not change anything on the launch target.
type LeftoverFinder interface {
	FindLeftovers(ctx context.Context, req ReclaimRequest) (LeftoversResponse, error)
}

// LeftoversResponse lists what a dead apply left running, as the provider
// found it.
type LeftoversResponse struct {
	Leftovers []Leftover
}

// Leftover is one thing a dead apply left running on a launch target.
type Leftover struct {
	// Launch is the launch it belongs to, or nil for one that has no
	// launch record (for local: an attempt's process group whose agent is
	// gone).
	Launch *LaunchRecord
	// What names it for people, e.g. "worker process 4242 (launch 1 of
	// pool builders)".
	What string
	// Stop says how to stop it by hand, e.g. "kill -KILL 4242".
	Stop string
}

// ReclaimRequest lists what dead applies left, to stop.
type ReclaimRequest struct {
	// WorkDir is the work folder of the state (the caller's); a launch
	// recorded with another work folder is not this state's and is left
	// alone.
	WorkDir string
	// Launches are the launches the dead applies recorded and never saw
	// gone (for providers that stop workers by record).
	Launches []LaunchRecord
	// ApplyIDs are the ids of the dead applies, for providers that find
	// what an apply created by the id it labelled them with (a pod, a Ray
	// job); they include applies that recorded no launch. Lineage is the
	// state's lineage, which those labels carry too.
	ApplyIDs []string
	Lineage  string
	// Settings are the settings of the configuration's pools of this
	// provider (see LaunchRequest.Settings): where to look.
	Settings []wdchcl.ProviderSettings
}

// LaunchRecord is what a provider returned for one launch, as the state
// keeps it (state.Launch).
type LaunchRecord struct {
	ApplyID string
	Pool    string
	Seq     int
	// ID is the LaunchResponse.ID; Host, PID, ProcessStart and Argv are
	// the LaunchResponse's; WorkDir the LaunchRequest's.
	ID           string
	Host         string
	PID          int
	ProcessStart string
	Argv         []string
	WorkDir      string
}

// ReclaimResponse says what Reclaim stopped.
type ReclaimResponse struct {
	// Stopped lists the launches whose worker it stopped; Gone those
	// already gone (no longer running, or not what the record names).
	Stopped, Gone []LaunchRecord
	// OrphanWorkers counts workers it stopped that no launch record
	// names (for kubernetes and ray: Jobs labelled with a dead apply's id
	// whose launch the state no longer had open); OrphanAttempts the
	// attempts it stopped whose worker was already gone (for local:
	// attempt process groups whose agent is dead).
	OrphanWorkers, OrphanAttempts int
}

// CleanupRequest names a worker that has exited.
type CleanupRequest struct {
	// ID is a LaunchResponse.ID.
	ID string
	// WorkDir is the work folder the worker was launched with.
	WorkDir string
}

// LaunchRequest describes one worker to launch.
type LaunchRequest struct {
	// Pool is the name of the worker's pool.
	Pool string
	// Lineage is the state's lineage, ApplyID the apply's id and Seq the
	// pool's launch sequence (1, 2, … within the apply; a replacement gets
	// a new number): providers name what they create by (Lineage, ApplyID,
	// Pool, Seq), so no two launches share a name.
	Lineage string
	ApplyID string
	Seq     int
	// ServerURL is the coordinator's base URL the agent connects to (the
	// apply's advertise URL).
	ServerURL string
	// CASHA256 is the SHA-256 fingerprint the agent pins the coordinator's
	// TLS certificate chain by ("" for plain HTTP, or to verify with the
	// system's roots); it is not a secret and goes on the command line.
	CASHA256 string
	// Credential is the launch's one-time credential. Providers pass it
	// only through the environment (protocol.LaunchCredentialEnv), never
	// on a command line.
	Credential string
	// WorkDir is the agent's work folder (attempt logs and scratch).
	WorkDir string
	// LogPath is the file that receives the agent's own stdout and stderr.
	LogPath string
	// Env holds extra environment variables for the agent.
	Env map[string]string
	// Executable is the path of the wdc binary to run.
	Executable string
	// Unconfined passes --unconfined to the agent: the pool said
	// confine = false, and its attempts run without confinement.
	Unconfined bool
	// DrainTimeout is passed to the agent's --drain-timeout; 0 leaves the
	// agent's default (60 s).
	DrainTimeout time.Duration
	// HeartbeatTTL is the pool's heartbeat ttl (a provider that mirrors
	// liveness, like the Kubernetes Lease, uses it as the lease duration).
	HeartbeatTTL time.Duration
	// Settings are the pool's settings as the provider decoded them from
	// the pool's provider block (its Info.Schema): a value of the
	// provider's own type (for kubernetes: *kubernetes.Settings), or nil
	// for a pool without any. Each provider documents what it needs.
	Settings wdchcl.ProviderSettings
}

// LaunchResponse describes a launched worker.
type LaunchResponse struct {
	// ID is the provider's handle for the worker, as Stop and Status take
	// it, e.g. "pid:1234" for local. It is meant to be stored.
	ID string
	// PID is the agent's process id when the provider knows it, else 0.
	PID int
	// Argv is the command line the worker runs (without the credential).
	Argv []string
	// Host is the machine the worker runs on, when the provider knows it.
	Host string
	// ProcessStart identifies the worker process's start in a
	// provider-specific way (local: the kernel's start time of the pid), so
	// that a reused pid is never taken for it; "" when there is none.
	ProcessStart string
}

// StopRequest asks a worker to stop.
type StopRequest struct {
	// ID is a LaunchResponse.ID.
	ID string
	// Kill stops the worker at once (SIGKILL) instead of draining it.
	Kill bool
}

// StatusRequest asks about a worker.
type StatusRequest struct {
	// ID is a LaunchResponse.ID.
	ID string
}

// StatusResponse describes a worker's state.
type StatusResponse struct {
	// Running is true while the worker's process (or job) is alive.
	Running bool
	// ExitCode is the worker's exit code once it has exited, when the
	// provider knows it (nil while running, when killed by a signal, or
	// for a worker this provider instance did not launch).
	ExitCode *int
	// Signal names the signal that ended the worker ("SIGKILL"), or "".
	Signal string
}

// Render returns the argv that launches the worker req describes:
//
//	<Executable> agent --server URL --pool NAME --work-dir DIR [--ca-sha256 HEX] [--drain-timeout D]
//
// Every provider runs this command (as a process, a Ray entrypoint or a
// container command), and `wdc plan` shows it. The credential is not in it.
func Render(req LaunchRequest) []string {
	argv := []string{req.Executable, "agent", "--server", req.ServerURL, "--pool", req.Pool, "--work-dir", req.WorkDir}
	if req.CASHA256 != "" {
		argv = append(argv, "--ca-sha256", req.CASHA256)
	}
	if req.DrainTimeout > 0 {
		argv = append(argv, "--drain-timeout", req.DrainTimeout.String())
	}
	if req.Unconfined {
		argv = append(argv, "--unconfined")
	}
	return argv
}

// LivenessMirror is implemented by providers that show on their launch
// target which workers are alive (the Kubernetes provider moves a
// coordination.k8s.io Lease per worker). Apply calls it from its loop
// after a worker's heartbeat, no more often than the pool's heartbeat
// interval, in the background. A mirror is for people and tools only:
// fencing tokens stay in wdc's state.
type LivenessMirror interface {
	MirrorLiveness(ctx context.Context, req LivenessRequest) error
}

// LivenessRequest says that a worker was alive.
type LivenessRequest struct {
	// ID is a LaunchResponse.ID; WorkerID the id it registered with.
	ID, WorkerID string
	// Renewed is when the coordinator last heard from it.
	Renewed time.Time
}
