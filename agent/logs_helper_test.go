package agent

import (
	"fmt"
	"os"
)

// openLogs makes an attempt's log folders and its task's address file and
// creates (or truncates) its stdout and stderr logs, as an attempt's
// copiers do at their first bytes (attemptLogs.create): tests write logs
// with it.
func openLogs(paths attemptPaths, task string) (stdout, stderr *os.File, err error) {
	if err := makeLogFolders(paths, task); err != nil {
		return nil, nil, err
	}
	stdout, err = openFile(paths.stdout, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the stdout log: %v", err)
	}
	stderr, err = openFile(paths.stderr, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		stdout.Close()
		return nil, nil, fmt.Errorf("creating the stderr log: %v", err)
	}
	return stdout, stderr, nil
}
