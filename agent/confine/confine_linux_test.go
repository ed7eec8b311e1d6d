//go:build linux

package confine

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
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
// attempt, in dir, and returns what it printed and its exit code.
func run(t *testing.T, work, attempt, dir, script string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	release, err := Start(cmd, Policy{Hide: []string{work}, Show: []string{attempt}})
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

func TestConfinedAttempt(t *testing.T) {
	requireConfinement(t)
	dir := t.TempDir()
	work := filepath.Join(dir, ".wdc")
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
	// a process outside the attempt: the test itself stands for the agent,
	// sleep for a sibling
	sibling := exec.Command("sleep", "60")
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sibling.Process.Kill(); sibling.Wait() }()
	self, sib := strconv.Itoa(os.Getpid()), strconv.Itoa(sibling.Process.Pid)

	tests := []struct {
		name, script string
		wantCode     int
		wantOut      string // a substring of the output, when set
	}{
		{"the work folder is empty", `ls -A ` + work, 0, "scratch"},
		{"the operator credential is hidden", `cat ` + work + `/operator-credential`, 1, "No such file"},
		{"the spool is hidden", `cat ` + work + `/spool/w-1/session.json`, 1, "No such file"},
		{"the state is hidden", `cat ` + work + `/state.db`, 1, "No such file"},
		{"nothing is written beside the attempt", `echo x > ` + work + `/planted`, 2, "Read-only file system"},
		{"its attempt folder is its own", `cat ` + attempt + `/input.txt && echo out > ` + attempt + `/output.txt && cat ` + attempt + `/output.txt`, 0, "mine\nout"},
		{"its dir is writable", `echo ok > written.txt && cat written.txt`, 0, "ok"},
		{"the agent cannot be signalled", `kill -TERM ` + self, 1, "not permitted"},
		{"a sibling cannot be signalled", `kill -TERM ` + sib, 1, "not permitted"},
		{"the agent's environment is unreadable", `cat /proc/` + self + `/environ`, 1, "denied"},
		{"a sibling's environment is unreadable", `cat /proc/` + sib + `/environ`, 1, "denied"},
		{"the agent's root is unreachable", `ls /proc/` + self + `/root/`, 2, "denied"},
		{"the agent's memory cannot be opened", `exec 3</proc/` + self + `/mem && echo opened`, 2, "denied"},
		{"the cover cannot be undone", `umount ` + work, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, work, attempt, dir, tt.script)
			if tt.name == "the cover cannot be undone" {
				// whatever umount says, the cover must still be there after
				out, code = run(t, work, attempt, dir, `umount -l `+work+` 2>&1; cat `+work+`/operator-credential`)
				if strings.Contains(out, "wdco_secret") {
					t.Fatalf("the cover came off: %s", out)
				}
				return
			}
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) {
				t.Errorf("%s: exit %d, output %q; want exit %d and %q", tt.script, code, out, tt.wantCode, tt.wantOut)
			}
			if strings.Contains(out, "secret") {
				t.Errorf("%s leaked a secret: %q", tt.script, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(attempt, "output.txt")); err != nil {
		t.Errorf("what the attempt wrote in its folder is not there outside it: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "planted")); err == nil {
		t.Error("a file was planted in the work folder")
	}
	if err := sibling.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the sibling died: %v", err)
	}
}

func TestProbeSaysWhatIsMissing(t *testing.T) {
	st := Probe()
	if st.Confined == (st.Missing != "") || (st.Confined && st.Mechanism == "") {
		t.Fatalf("Probe = %+v: exactly one of Mechanism and Missing", st)
	}
}
