//go:build linux

package confine

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireConfinement skips where this process cannot confine, except in CI
// (CI=true), which runs as root on a kernel with Landlock ABI 6+: there a
// machine that cannot confine is a failure.
func requireConfinement(t *testing.T) {
	t.Helper()
	if st := Probe(); !st.Confined {
		if os.Getenv("CI") == "true" {
			t.Fatalf("attempts cannot be confined in CI: %s", st.Missing)
		}
		t.Skip(st.Missing)
	}
}

// run starts script under sh confined by a policy that hides work and shows
// attempt, in dir, by mech, and returns what it printed and its exit code.
func run(t *testing.T, mech mechanism, work, attempt, dir, script string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, err := startWith(cmd, Policy{Hide: []string{work}, Show: []string{attempt}, ReadOnly: []string{"/sys", "/proc/sys"},
		HideFiles: []string{filepath.Join(filepath.Dir(dir), "join.json")}}, mech)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	release()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// fixture makes a work folder at work with a credential, a session, a
// state and an attempt folder holding input.txt, and returns the attempt
// folder.
func fixture(t *testing.T, work string) string {
	t.Helper()
	attempt := filepath.Join(work, "scratch", "task.t", "1")
	for _, p := range []string{attempt, filepath.Join(work, "spool", "w-1")} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(work, "operator-credential"):          "wdco_secret\n",
		filepath.Join(work, "spool", "w-1", "session.json"): `{"session_token":"wdcs_secret"}`,
		filepath.Join(work, "state.db"):                     "SQLite format 3",
		filepath.Join(attempt, "input.txt"):                 "mine\n",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return attempt
}

// TestConfinedAttempt runs the same tries under both mechanisms: with a
// mount namespace the work folder is an empty cover (its files are not
// there); with Landlock rules alone it is listed but nothing in it can be
// read or written, and the folders above it take no new entries.
func TestConfinedAttempt(t *testing.T) {
	requireConfinement(t)
	for _, mech := range []mechanism{byMount, byLandlock} {
		if mech == byMount && probed.mech != byMount {
			t.Log("no mount namespace here: byMount not tried")
			continue
		}
		t.Run(map[mechanism]string{byMount: "mount", byLandlock: "landlock"}[mech], func(t *testing.T) {
			testConfinedAttempt(t, mech)
		})
	}
}

func testConfinedAttempt(t *testing.T, mech mechanism) {
	base := t.TempDir()
	dir := filepath.Join(base, "cfg")
	work := filepath.Join(dir, ".wdc") // the default: the work folder in the configuration directory
	if mech == byLandlock {
		work = filepath.Join(base, "work") // beside it: byLandlock refuses a dir above the work folder
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	attempt := fixture(t, work)
	if err := os.WriteFile(filepath.Join(base, "join.json"), []byte(`{"credential":"wdcj_secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // beside base, not above the work folder
	// a process outside the attempt: the test itself stands for the agent,
	// sleep for a sibling
	sibling := exec.Command("sleep", "60")
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sibling.Process.Kill(); sibling.Wait() }()
	self, sib := strconv.Itoa(os.Getpid()), strconv.Itoa(sibling.Process.Pid)
	// what a refused read or write says: the cover has no such file and is
	// read-only; a Landlock rule denies
	gone, readOnly := "No such file", "Read-only file system"
	if mech == byLandlock {
		gone, readOnly = "denied", "denied"
		for name, target := range map[string]string{"work-link": work, "root-link": "/"} {
			if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
				t.Fatal(err)
			}
		}
	}

	tests := []struct {
		name, script string
		mech         mechanism // 0: both
		wantCode     int
		wantOut      string // a substring of the output, when set
	}{
		{"the work folder is empty", `ls -A ` + work, byMount, 0, "scratch"},
		{"the work folder's names are listed", `ls -A ` + work, byLandlock, 0, "operator-credential"},
		{"the operator credential is hidden", `cat ` + work + `/operator-credential`, 0, 1, gone},
		{"the spool is hidden", `cat ` + work + `/spool/w-1/session.json`, 0, 1, gone},
		{"the state is hidden", `cat ` + work + `/state.db`, 0, 1, gone},
		{"nothing is written beside the attempt", `echo x > ` + work + `/planted`, 0, 2, readOnly},
		{"no spool entry is planted", `mkdir ` + work + `/spool/w-2`, 0, 1, gone},
		{"its attempt folder is its own", `cat ` + attempt + `/input.txt && echo out > ` + attempt + `/output.txt && cat ` + attempt + `/output.txt`, 0, 0, "mine\nout"},
		{"its dir is writable", `echo ok > written.txt && cat written.txt`, 0, 0, "ok"},
		{"the rest of the file system is as it was", `echo ok > ` + other + `/beside.txt && cat ` + other + `/beside.txt && cat /etc/hostname >/dev/null && echo read`, 0, 0, "ok\nread"},
		{"a link to the work folder leads nowhere", `cat ` + base + `/work-link/operator-credential`, byLandlock, 1, "denied"},
		{"a link to / leads nowhere", `cat ` + base + `/root-link` + work + `/operator-credential`, byLandlock, 1, "denied"},
		{"a folder above the work folder takes no entries", `echo x > ` + base + `/new.txt`, byLandlock, 2, "denied"},
		{"the agent cannot be signalled", `kill -TERM ` + self, 0, 1, "not permitted"},
		{"a sibling cannot be signalled", `kill -TERM ` + sib, 0, 1, "not permitted"},
		{"the agent's environment is unreadable", `cat /proc/` + self + `/environ`, 0, 1, "denied"},
		{"a sibling's environment is unreadable", `cat /proc/` + sib + `/environ`, 0, 1, "denied"},
		{"the agent's root is unreachable", `ls /proc/` + self + `/root/`, 0, 2, "denied"},
		{"the agent's memory cannot be opened", `exec 3</proc/` + self + `/mem && echo opened`, 0, 2, "denied"},
		{"the folders above the work folder stay where they are", `mv ` + filepath.Dir(work) + ` ` + filepath.Dir(work) + `.moved || echo refused`, 0, 0, "refused"},
		{"the join file reads empty", `cat ` + filepath.Join(base, "join.json") + ` && echo read`, byMount, 0, "read"},
		{"the cgroups cannot be changed", `mkdir ` + cgroups + `/wdc-confine-test || echo refused`, 0, 0, "refused"},
		{"the kernel's settings cannot be changed", `cat /proc/sys/kernel/core_pattern > /dev/null && (cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>/dev/null || echo refused`, byMount, 0, "refused"},
		// CAP_NET_ADMIN and CAP_NET_RAW (bits 12 and 13) would sniff the
		// loopback's bearer tokens
		{"no raw socket is opened", `grep -q '^CapBnd:.*[048c][0-9a-f]\{3\}$' /proc/self/status && echo dropped`, 0, 0, "dropped"},
		// CAP_DAC_READ_SEARCH (bit 2) would open files by handle past the cover
		{"no file is opened by handle", `grep -q '^CapBnd:.*[0-9a-f]*[0-389ab]$' /proc/self/status && echo dropped`, 0, 0, "dropped"},
	}
	for _, tt := range tests {
		if tt.mech != 0 && tt.mech != mech {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, mech, work, attempt, dir, tt.script)
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) {
				t.Errorf("%s: exit %d, output %q; want exit %d and %q", tt.script, code, out, tt.wantCode, tt.wantOut)
			}
			if strings.Contains(out, "secret") {
				t.Errorf("%s leaked a secret: %q", tt.script, out)
			}
		})
	}
	t.Run("the confinement cannot be undone", func(t *testing.T) {
		out, _ := run(t, mech, work, attempt, dir, `umount -l `+work+` 2>&1; unshare -m sh -c 'cat `+work+`/operator-credential' 2>&1; cat `+work+`/operator-credential 2>&1`)
		if strings.Contains(out, "wdco_secret") {
			t.Fatalf("the confinement came off: %s", out)
		}
	})
	if _, err := os.Stat(filepath.Join(attempt, "output.txt")); err != nil {
		t.Errorf("what the attempt wrote in its folder is not there outside it: %v", err)
	}
	for _, p := range []string{filepath.Join(work, "planted"), filepath.Join(work, "spool", "w-2"), filepath.Join(base, "new.txt")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was made", p)
		}
	}
	if err := sibling.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the sibling died: %v", err)
	}
	if _, err := os.Stat(cgroups + "/wdc-confine-test"); err == nil {
		os.Remove(cgroups + "/wdc-confine-test")
		t.Error("a confined command made a cgroup")
	}
}

// cgroups is the cgroup file system, which a confined command may read
// but not change (Policy.ReadOnly).
const cgroups = "/sys/fs/cgroup"

// TestLandlockRefusesADirAboveTheWorkFolder: under byLandlock a command
// whose dir holds the work folder could not write in its dir, so Start
// refuses it with ErrUnavailable (the agent then runs it unconfined and
// says so) and starts nothing.
func TestLandlockRefusesADirAboveTheWorkFolder(t *testing.T) {
	requireConfinement(t)
	dir := t.TempDir()
	work := filepath.Join(dir, ".wdc")
	attempt := fixture(t, work)
	tests := []struct {
		name, dir string
		refused   bool
	}{
		{"the configuration directory above .wdc", dir, true},
		{"the work folder itself", work, true},
		{"its attempt folder", attempt, false},
		{"a folder beside", t.TempDir(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/true")
			cmd.Dir = tt.dir
			release, err := startWith(cmd, Policy{Hide: []string{work}, Show: []string{attempt}}, byLandlock)
			if tt.refused {
				if !errors.Is(err, ErrUnavailable) || cmd.Process != nil {
					t.Fatalf("startWith = %v, process %v; want ErrUnavailable and nothing started", err, cmd.Process)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			release()
		})
	}
}

func TestProbeSaysWhatIsMissing(t *testing.T) {
	st := Probe()
	if st.Confined == (st.Missing != "") || (st.Confined && st.Mechanism == "") {
		t.Fatalf("Probe = %+v: exactly one of Mechanism and Missing", st)
	}
}

// BenchmarkStart starts /bin/true plain and confined by each mechanism,
// with the work folder in a fresh folder of the test's temporary folder.
func BenchmarkStart(b *testing.B) {
	if st := Probe(); !st.Confined {
		b.Skip(st.Missing)
	}
	work := filepath.Join(b.TempDir(), "work")
	attempt := filepath.Join(work, "scratch", "t", "1")
	if err := os.MkdirAll(attempt, 0o700); err != nil {
		b.Fatal(err)
	}
	p := Policy{Hide: []string{work}, Show: []string{attempt}}
	starts := map[string]func(*exec.Cmd) (func(), error){
		"plain":    func(c *exec.Cmd) (func(), error) { return func() {}, c.Start() },
		"landlock": func(c *exec.Cmd) (func(), error) { return startWith(c, p, byLandlock) },
	}
	if probed.mech == byMount {
		starts["mount"] = func(c *exec.Cmd) (func(), error) { return startWith(c, p, byMount) }
	}
	for _, name := range []string{"plain", "mount", "landlock"} {
		start, ok := starts[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cmd := exec.Command("/bin/true")
				cmd.Dir = attempt
				release, err := start(cmd)
				if err != nil {
					b.Fatal(err)
				}
				cmd.Wait()
				release()
			}
		})
	}
}

// TestMainThreadStaysAsItWas: confining is done on threads of their own,
// never on the main thread, which stands for the process (a command whose
// Landlock domain the main thread shared could signal the agent). Many
// starts from goroutines, one of which may run on the main thread, leave
// it without no_new_privs and with its bounding set whole.
func TestMainThreadStaysAsItWas(t *testing.T) {
	requireConfinement(t)
	before := mainThreadStatus(t)
	work := filepath.Join(t.TempDir(), "work")
	attempt := fixture(t, work)
	errs := make(chan error, 64)
	for i := 0; i < cap(errs); i++ {
		go func() {
			cmd := exec.Command("/bin/true")
			cmd.Dir = attempt
			release, err := Start(cmd, Policy{Hide: []string{work}, Show: []string{attempt}})
			if err == nil {
				err = cmd.Wait()
				release()
			}
			errs <- err
		}()
	}
	for i := 0; i < cap(errs); i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if after := mainThreadStatus(t); after != before {
		t.Fatalf("the main thread changed: %q, was %q", after, before)
	}
}

// mainThreadStatus is the main thread's NoNewPrivs and CapBnd lines.
func mainThreadStatus(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/task/" + strconv.Itoa(os.Getpid()) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "NoNewPrivs:") || strings.HasPrefix(line, "CapBnd:") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "; ")
}

// TestNoThreadOfTheAgentCanBeSignalled: a confined command may signal no
// thread of its agent, not even the one that confined itself and started
// it (it shares the command's Landlock domain, and tgkill of it would stop
// or kill the whole agent): that thread is gone before the command runs,
// even when it takes long to end after it detached the command (every
// other try here).
func TestNoThreadOfTheAgentCanBeSignalled(t *testing.T) {
	requireConfinement(t)
	t.Cleanup(func() { lingerAfterDetach = 0 })
	for _, mech := range mechanismsHere() {
		work := filepath.Join(t.TempDir(), "work")
		attempt := fixture(t, work)
		for i := 0; i < 20; i++ {
			lingerAfterDetach = time.Duration(i%2) * 20 * time.Millisecond
			var out bytes.Buffer
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), probeEnv+"=tgkill")
			cmd.Dir, cmd.Stdout, cmd.Stderr = attempt, &out, &out
			release, err := startWith(cmd, Policy{Hide: []string{work}, Show: []string{attempt}}, mech)
			if err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			release()
			if err != nil || !strings.HasPrefix(out.String(), "0 of ") {
				t.Fatalf("mechanism %d, try %d: the command may signal threads of its agent: %q (%v)", mech, i, out.String(), err)
			}
		}
	}
}

// TestOrdinaryUserConfines: an agent run by an ordinary user (no
// capabilities, the bounding set whole, as a login gives it) confines its
// attempts by Landlock rules: it cannot drop capabilities from the bounding
// set, and needs not.
func TestOrdinaryUserConfines(t *testing.T) {
	requireConfinement(t)
	setpriv, err := exec.LookPath("setpriv")
	if os.Geteuid() != 0 || err != nil {
		t.Skip("needs root and setpriv to become an ordinary user")
	}
	// the test binary where the user may run it
	exe := filepath.Join(t.TempDir(), "confine.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", exe)
	cmd.Env = append(os.Environ(), probeEnv+"=start")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "started by Landlock") || !strings.Contains(string(out), "wait <nil>") {
		t.Fatalf("as an ordinary user: %q (%v); want a command started by Landlock rules, ended well", out, err)
	}
}

// TestStartedBeforeTheCommandRuns: Policy.Started is called with the
// command's pid while the command is stopped at its exec, before its
// program runs (the agent records the process group there), by either
// mechanism.
func TestStartedBeforeTheCommandRuns(t *testing.T) {
	requireConfinement(t)
	for _, mech := range mechanismsHere() {
		work := filepath.Join(t.TempDir(), "work")
		attempt := fixture(t, work)
		marker := filepath.Join(attempt, "ran")
		cmd := exec.Command("/bin/sh", "-c", "echo > ran")
		cmd.Dir = attempt
		var calledWith int
		var ranBefore bool
		var stateBefore string
		p := Policy{Hide: []string{work}, Show: []string{attempt}, Started: func(pid int) {
			calledWith = pid
			_, err := os.Stat(marker)
			ranBefore = err == nil
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			for _, line := range strings.Split(string(status), "\n") {
				if s, ok := strings.CutPrefix(line, "State:"); ok {
					stateBefore = strings.TrimSpace(s)
				}
			}
		}}
		release, err := startWith(cmd, p, mech)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("mechanism %d: %v", mech, err)
		}
		release()
		if calledWith != cmd.Process.Pid {
			t.Fatalf("mechanism %d: Started called with pid %d, want %d", mech, calledWith, cmd.Process.Pid)
		}
		if ranBefore || !strings.HasPrefix(stateBefore, "t") {
			t.Errorf("mechanism %d: at Started the command had run: %v, its state %q (want a tracing stop)", mech, ranBefore, stateBefore)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("mechanism %d: the command did not run after Started: %v", mech, err)
		}
	}
}

// mechanismsHere lists the ways this process can hide a folder: Landlock
// rules always (requireConfinement), a mount namespace where the probe
// found one.
func mechanismsHere() []mechanism {
	if probed.mech == byMount {
		return []mechanism{byMount, byLandlock}
	}
	return []mechanism{byLandlock}
}
