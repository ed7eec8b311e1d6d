package agentcli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// selfExe is the running binary, as the kernel has it: it needs no PATH
// and no shell, which an agent image built FROM scratch has neither of.
const selfExe = "/proc/self/exe"

// InstallAgentCmd copies the running binary to DEST, executable: what the
// init container of a Kubernetes pool with agent_image runs (the agent
// image's own entrypoint, with `install-agent /wdc-agent-bin/wdc-agent`), so
// that the task's image, which holds no agent, runs it from a shared
// emptyDir.
type InstallAgentCmd struct {
	Dest string `arg:"" name:"DEST" help:"Where to put the copy (its folder must exist)."`
}

// Run copies /proc/self/exe to a temporary file beside Dest, makes it
// mode 0755, syncs it and renames it onto Dest, so a reader never sees a
// partial binary; it prints what it wrote.
func (c *InstallAgentCmd) Run(e *Env) error {
	n, err := copySelf(selfExe, c.Dest)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s %s: copied itself (%d bytes) to %s\n", e.Build.Name, e.Build.Version, n, c.Dest)
	return nil
}

// copySelf copies the file src to dest as InstallAgentCmd.Run says.
func copySelf(src, dest string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, fmt.Errorf("install-agent: reading the running binary: %w", err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return 0, fmt.Errorf("install-agent: %w", err)
	}
	n, err := io.Copy(tmp, in)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		os.Remove(tmp.Name()) //nolint:errcheck // the error below says what failed
		return 0, fmt.Errorf("install-agent: writing %s: %w", dest, err)
	}
	return n, nil
}
