// Package confine starts an attempt's command so that it cannot act as the
// worker that runs it: it cannot read or write the work folder (the state
// file, the spool with the worker's session, the operator credential, the
// CA key, the artifact store) except its own attempt folder, cannot signal,
// trace or read the memory, environment or files of processes outside its
// own attempt (its agent, the apply, a sibling attempt), and cannot undo any
// of that, even as root.
//
// # What it owns, and what it does not
//
// It owns the mechanism (docs/design.md §9, "Confined attempts"). On Linux,
// from one locked OS thread of the agent, just before it forks the command:
//
//   - a mount namespace of the thread's own (unshare CLONE_FS|CLONE_NEWNS,
//     mounts private) in which every Policy.Hide folder is covered by an
//     empty tmpfs and every Policy.Show folder (the attempt's own) is bound
//     back in place: the command sees the rest of the file system as it is;
//   - the capabilities that would let it undo that or look into other
//     processes dropped from the bounding set (CAP_SYS_ADMIN, CAP_SYS_PTRACE,
//     CAP_PERFMON, CAP_BPF, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_BOOT,
//     CAP_SYSLOG), and no_new_privs;
//   - a Landlock domain of its own (github.com/landlock-lsm/go-landlock) that
//     scopes signals and abstract UNIX sockets to the attempt and, as every
//     Landlock domain does, denies ptrace and /proc/PID/{mem,environ,root,
//     cwd,exe,fd} of processes outside it.
//
// The thread then forks the command, which inherits all of it, stopped at
// its exec (traced), and ends before the command runs on: the thread is in
// the command's Landlock domain, and a command could signal it (and with
// it stop or kill the whole agent) while it lived.
// Nothing here runs per attempt but a few system calls: no process is
// started to set an attempt up.
//
// It does not decide what an attempt may see (the agent builds the Policy)
// nor keep credentials off disk or out of the agent's own /proc entries
// (the agent makes itself non-dumpable, MakeUndumpable).
package confine

import "os/exec"

// Policy is what one attempt may reach of the work folder.
type Policy struct {
	// Hide lists folders the command must not reach at all: each is
	// covered by an empty, read-only-for-others tmpfs. Absolute paths.
	Hide []string
	// Show lists folders inside a Hide folder that the command reaches
	// read-write as they are (its attempt folder). Absolute paths.
	Show []string
	// ReadOnly lists folders the command may read but not change, even as
	// root: /sys (its cgroups, through which a root command could freeze
	// or kill its agent) and /proc/sys (a core_pattern would run a program
	// of its choosing as root, outside any confinement). Absolute paths;
	// one that does not exist is left out. Confined by Landlock rules
	// alone, a folder of /proc is left to the mounts (containers mount
	// /proc/sys read-only themselves).
	ReadOnly []string
	// HideFiles lists files the command must not read (an agent's join
	// file): each is covered by an empty read-only file. Only a mount
	// namespace does it: Landlock rules, which cannot take rights back in a
	// folder the command writes in, leave them as they are. Absolute paths;
	// one that does not exist is left out.
	HideFiles []string
	// Started, when set, is called with the command's pid (the leader of
	// its process group when cmd asks for one) after it is forked and
	// before its program runs a single instruction, on the caller's side
	// of the confinement: the agent records the process group there, so
	// an agent killed at any moment after Start leaves no attempt that
	// procgroup.KillOrphans cannot find.
	Started func(pid int)
}

// Status says what confinement this process can give its attempts.
type Status struct {
	// Confined is true when every protection of the package applies.
	Confined bool
	// Mechanism names what applies, e.g. "mount namespace, capabilities,
	// Landlock ABI 7".
	Mechanism string
	// Missing says, when Confined is false, what is missing and what an
	// unconfined attempt can then do.
	Missing string
	// Limits says, when Confined is true, what a confined attempt cannot
	// do here that it could unconfined, beyond reaching the work folder
	// ("" when nothing: a mount namespace hides only the work folder).
	Limits string
}

// Start starts cmd confined by p. release must be called once cmd has
// been waited for (or failed to start: then release is nil and err says
// why). Where this platform or process cannot confine (Probe's Missing),
// Start fails with ErrUnavailable and starts nothing: the caller decides
// whether to run the command unconfined. On Linux the command is started
// traced and without a parent-death signal (cmd.SysProcAttr's Ptrace and
// Pdeathsig are overridden): the thread that confined itself to start it
// ends before the command runs, so that the command cannot signal it.
func Start(cmd *exec.Cmd, p Policy) (release func(), err error) {
	return start(cmd, p)
}

// Probe reports what Start can give on this machine, to this process.
func Probe() Status { return probe() }
