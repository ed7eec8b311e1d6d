package agent

import (
	"fmt"
	"strings"

	"github.com/wdc-dev/wdc/protocol"
)

// execTextProblem says why the definition d cannot be started as it is,
// or "": a NUL character in its command, an env name or value, or its dir
// (exec would refuse it, and the attempt would pass for lost), or an env
// name that is empty or holds "=" (the task would see another variable:
// "A=B" with value x is A=B=x, the variable A). A configuration with one
// is refused when it loads (wdc validate, with where it is); this is the
// second line, for a definition from anywhere else. It names no env
// variable: its name or value may be sensitive.
func execTextProblem(d protocol.Definition) string {
	for i, arg := range d.Command {
		if strings.ContainsRune(arg, 0) {
			return fmt.Sprintf("element %d of the command holds a NUL character", i)
		}
	}
	for name, value := range d.Env {
		switch {
		case name == "":
			return "an env name is empty"
		case strings.ContainsRune(name, 0):
			return "an env name holds a NUL character"
		case strings.ContainsRune(name, '='):
			return `an env name holds "="`
		case strings.ContainsRune(value, 0):
			return "an env value holds a NUL character"
		}
	}
	if strings.ContainsRune(d.Dir, 0) {
		return "the dir holds a NUL character"
	}
	return ""
}
