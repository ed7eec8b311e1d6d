// Package kubernetes is the "kubernetes" provider: it runs each worker as
// a batch/v1 Job through client-go. A launch creates a Secret (the
// launch's one-time credential), the Job (its pod runs `agent …` as the
// arguments of the image's entrypoint or of the pool's command, or, with
// agent_image, of an agent an init container copied into the pod; it
// reads the credential from the Secret; backoffLimit 0, deadline and TTL
// from the pool) and a coordination.k8s.io/v1 Lease (the worker's
// liveness, for `kubectl get leases`), all labelled with the state's
// lineage, the apply, the pool and the launch (Label*), so that what a
// dead apply left is found again and nothing else is.
//
// What it owns:
//
//   - a pool's kubernetes { } block: its schema, defaults and checks
//     (Schema; names, label keys and values checked with apimachinery's
//     validation), decoded into *Settings, which every launch request of
//     the pool carries back;
//   - rendering a launch's objects without a cluster (Render, RenderLaunch)
//     and checking them with a server-side dry run (DryRunLaunch);
//   - creating, watching (informers on the Jobs and pods of each apply),
//     stopping and deleting them, streaming the agent's log into the
//     launch's log file, reporting a pod that cannot start or ends early
//     in the container runtime's words (and as Permanent when no other
//     launch would do better), and moving the Lease after each heartbeat
//     (MirrorLiveness);
//   - finding and deleting what dead applies left (Reclaim,
//     FindLeftovers), by their labels.
//
// What it does not own: when to launch or stop a worker (package engine),
// what a worker says (it speaks worker protocol v1 with the coordinator,
// package protocol), and fencing: the Lease is for people and tools only.
// Writes to a cluster are off unless the pool's block has
// allow_writes = true (apply refuses before it reaches the cluster).
package kubernetes
