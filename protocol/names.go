package protocol

import (
	"errors"
	"strings"
)

// CheckArtifactName checks the name of an artifact, wherever one enters
// wdc: an output or a log a result names, an input file of an assignment,
// the output and input patterns of a configuration, the files an agent
// collects from an attempt's directory. A name is a "/"-separated path
// relative to the folder it belongs to (the attempt's directory, the
// configuration directory), which cannot leave that folder and reads the
// same on every system: it is not empty and not absolute (no leading
// "/"), and holds no NUL, no backslash (a separator on Windows), no empty
// part ("a//b", a trailing "/") and no "." or ".." part. A pattern obeys
// the same rules, its parts read literally ("out/*" is fine, "out/.." is
// not). The error says what is wrong, as a predicate to put after the
// name: fmt.Errorf("output %q %v", name, err).
func CheckArtifactName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case strings.IndexByte(name, 0) >= 0:
		return errors.New("holds a NUL byte")
	case strings.HasPrefix(name, "/"):
		return errors.New("is absolute: it must be relative to its folder")
	case strings.Contains(name, `\`):
		return errors.New(`holds a backslash: its parts are separated with "/"`)
	}
	for part := range strings.SplitSeq(name, "/") {
		switch part {
		case "":
			return errors.New(`has an empty part ("a//b", or a trailing "/")`)
		case ".", "..":
			return errors.New(`has a "." or ".." part: it cannot leave its folder`)
		}
	}
	return nil
}
