package state

// Status enumerations (docs/design.md §2). The schema carries the same lists in
// CHECK constraints; keep both in step.

// WorkerStatus is the liveness status of a worker.
type WorkerStatus string

const (
	WorkerActive   WorkerStatus = "active"
	WorkerDraining WorkerStatus = "draining"
	WorkerStale    WorkerStatus = "stale"
	WorkerGone     WorkerStatus = "gone"
)

// TaskStatus is the lifecycle status of a task instance.
type TaskStatus string

const (
	TaskPending   TaskStatus = "pending" // waiting on dependencies
	TaskQueued    TaskStatus = "queued"
	TaskRunning   TaskStatus = "running" // has an active lease
	TaskSucceeded TaskStatus = "succeeded"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Finished reports whether s is a final status.
func (s TaskStatus) Finished() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

// LeaseStatus is the status of a lease.
type LeaseStatus string

const (
	LeaseActive    LeaseStatus = "active"
	LeaseCompleted LeaseStatus = "completed"
	LeaseExpired   LeaseStatus = "expired"
	LeaseReleased  LeaseStatus = "released"
	LeaseRevoked   LeaseStatus = "revoked"
)

// FailureClass says which retry budget an unsuccessful attempt spends.
type FailureClass string

const (
	FailureClassFailure FailureClass = "failure" // spends retry.max_attempts
	FailureClassLost    FailureClass = "lost"    // spends retry.max_lost
	FailureClassRefused FailureClass = "refused" // fails the task at once
)

// Valid reports whether s is one of the worker statuses of docs/design.md §2.
func (s WorkerStatus) Valid() bool {
	switch s {
	case WorkerActive, WorkerDraining, WorkerStale, WorkerGone:
		return true
	}
	return false
}

// Valid reports whether s is one of the task statuses of docs/design.md §2.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskPending, TaskQueued, TaskRunning, TaskSucceeded, TaskFailed, TaskCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of the lease statuses of docs/design.md §2.
func (s LeaseStatus) Valid() bool {
	switch s {
	case LeaseActive, LeaseCompleted, LeaseExpired, LeaseReleased, LeaseRevoked:
		return true
	}
	return false
}

// Valid reports whether c is one of the failure classes of docs/design.md §2.
// The empty class (an attempt that has not ended, or succeeded) is not valid.
func (c FailureClass) Valid() bool {
	switch c {
	case FailureClassFailure, FailureClassLost, FailureClassRefused:
		return true
	}
	return false
}
