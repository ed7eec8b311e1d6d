package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/wdc-dev/wdc/artifact"
	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol"
)

// Inputs and outputs travel through the coordinator by hash
// (docs/protocol.md, "Artifacts"): before an attempt's command starts the
// agent fetches each input of its assignment into the attempt's directory
// and checks its hash; after a command that succeeded it finds the files
// its output patterns match there, and names them in the result.

// fetchFunc puts inputs into dir; a non-empty class means the attempt ends
// with it (refused: an input cannot be had; lost: the coordinator could not
// be reached), and msg says why.
type fetchFunc func(dir string, inputs []protocol.InputFile) (class, msg string)

// maxInputBytes caps one input file the agent accepts (the coordinator's
// own cap is max_artifact_size).
const maxInputBytes = 1 << 40

// checkDefinition recomputes the definition hash of the spec it was handed
// and returns why it refuses it ("definition_mismatch: …"), or "". An
// assignment of a task with dependencies carries their hashes; without them
// there is nothing to recompute against.
func checkDefinition(asg protocol.Assignment) string {
	if len(asg.Definition.DependsOn) > 0 && asg.DepHashes == nil {
		return ""
	}
	if got := protocol.DefinitionHash(asg.Definition, asg.DepHashes); got != asg.DefHash {
		return fmt.Sprintf("definition_mismatch: the definition handed over hashes to %s, not the lease's %s", protocol.ShortHash(got), protocol.ShortHash(asg.DefHash))
	}
	return ""
}

// insideDir joins a "/"-separated relative path to dir, refusing one that
// could leave it or reads otherwise elsewhere (protocol.CheckArtifactName).
func insideDir(dir, rel string) (string, error) {
	if err := protocol.CheckArtifactName(rel); err != nil {
		return "", fmt.Errorf("path %q %v", rel, err)
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}

// fetchInputs downloads each input into dir, checking its hash, retrying a
// coordinator that cannot be reached.
func (a *Agent) fetchInputs(ctx context.Context, dir string, inputs []protocol.InputFile) (class, msg string) {
	for _, in := range inputs {
		dst, err := insideDir(dir, in.Path)
		if err != nil {
			return ClassRefused, "refused: input: " + err.Error()
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return ClassLost, fmt.Sprintf("creating the folder of input %s: %v", in.Path, err)
		}
		var last error
		for n := 0; n < 5; n++ {
			last = a.fetchOne(ctx, dst, in)
			if last == nil || !reachFailure(last) || ctx.Err() != nil {
				break
			}
			sleep(ctx, a.retry.delay(n))
		}
		switch {
		case last == nil:
		case protocol.StatusOf(last) == http.StatusNotFound:
			return ClassRefused, fmt.Sprintf("refused: input %s (%s) is not to be had from the coordinator", in.Path, protocol.ShortHash(in.SHA256))
		case errors.Is(last, errHashMismatch):
			return ClassRefused, fmt.Sprintf("refused: input %s: %v", in.Path, last)
		default:
			return ClassLost, fmt.Sprintf("fetching input %s: %v", in.Path, last)
		}
	}
	return "", ""
}

var errHashMismatch = errors.New("content hash mismatch")

// fetchOne downloads one input to dst (FetchInput), within the agent's
// call timeout (at least 30 s).
func (a *Agent) fetchOne(ctx context.Context, dst string, in protocol.InputFile) error {
	cctx, cancel := context.WithTimeout(ctx, max(a.callTimeout(), 30*time.Second))
	defer cancel()
	err := FetchInput(cctx, a.client, dst, in)
	a.note(err)
	return err
}

// FetchInput downloads one input of an assignment (GET
// /v1/artifacts/{sha256} with client's session) to dst through a temporary
// file beside it, checks its SHA-256 and size, gives it mode 0700 when
// in.Executable (else 0600: the user's alone, as the work folder) and
// renames it into place; dst's folder must exist. Errors: the coordinator's (404 for a blob that is not an input of
// the worker's assignments), a mismatch (wrapping errHashMismatch), the
// file system's; nothing is left at dst after one.
func FetchInput(ctx context.Context, client *protocol.Client, dst string, in protocol.InputFile) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".wdc-input-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := client.GetArtifact(ctx, in.SHA256, io.MultiWriter(tmp, h), maxInputBytes)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != in.SHA256 || n != in.Size {
		return fmt.Errorf("%w: received %d bytes hashing to %s, want %d bytes %s", errHashMismatch, n, protocol.ShortHash(got), in.Size, protocol.ShortHash(in.SHA256))
	}
	mode := os.FileMode(0o600)
	if in.Executable {
		mode = 0o700
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// InputPath is where an input goes in dir: its "/"-separated relative
// path joined to dir. Errors: a path that is not relative or leaves dir.
func InputPath(dir string, in protocol.InputFile) (string, error) { return insideDir(dir, in.Path) }

// outputFile is one output an attempt produced.
type outputFile struct {
	ref  protocol.ArtifactRef
	path string // its copy in the stage, "" when it was too large to copy
}

// collectOutputs finds the files the output patterns match in dir (regular
// files only, by "/"-separated relative name, sorted), copies each into
// stage and hashes the copy. It reads dir only through an os.Root and never
// follows a link as the last part of a name: the attempt controls dir, and
// a link to a folder of the work folder (its spool, its credentials) or a
// file of /proc must not make the agent, which reaches them, hand them on
// as outputs. The copy, out of the attempt's reach, is what is hashed,
// spooled and uploaded: a process the attempt left behind cannot change
// it after, nor write into the spool through a shared file. An output of
// more than limit bytes (limit > 0) is not copied: its ref keeps its size,
// which fitArtifacts refuses. A pattern that matches no file, a pattern or
// a file name that is not a valid artifact name (protocol.CheckArtifactName:
// a pattern that could leave dir, a file named with a backslash) is an
// error naming it.
func collectOutputs(dir string, patterns []string, stage string, limit int64) ([]outputFile, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("the attempt's directory: %v", err)
	}
	defer root.Close()
	var out []outputFile
	seen := map[string]bool{}
	for _, p := range patterns {
		if err := protocol.CheckArtifactName(p); err != nil {
			return nil, fmt.Errorf("output pattern %q %v", p, err)
		}
		matches, err := fs.Glob(root.FS(), p)
		if err != nil {
			return nil, fmt.Errorf("output pattern %q: %v", p, err)
		}
		found := 0
		var skipped []string // matches that are not regular files, and why
		if len(matches) == 0 && !strings.ContainsAny(p, `*?[\`) {
			// A literal name that Glob did not match: fs.Glob follows a
			// link, and one that leads out of the directory or nowhere
			// matches nothing. Say it is a link.
			if fi, err := root.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				skipped = append(skipped, notAnOutput(p, root, nil))
			}
		}
		for _, rel := range matches {
			f, fi, err := regularfile.OpenIn(root, rel)
			if err != nil {
				if why := notAnOutput(rel, root, err); why != "" {
					skipped = append(skipped, why)
				}
				continue
			}
			o, err := stageOutput(f, fi, rel, p, seen, stage, limit)
			f.Close()
			if err != nil {
				return nil, err
			}
			found++
			if o != nil {
				out = append(out, *o)
			}
		}
		if found == 0 && len(skipped) > 0 {
			return nil, fmt.Errorf("declared output %q matched no regular file in the attempt's directory: %s", p, strings.Join(skipped, "; "))
		}
		if found == 0 {
			return nil, fmt.Errorf("declared output %q matched no file in the attempt's directory", p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ref.Name < out[j].ref.Name })
	return out, nil
}

// notAnOutput says why rel, which a pattern matched in root, is not an
// output (a link, a folder, another kind of file), or "" when it went
// away meanwhile.
func notAnOutput(rel string, root *os.Root, err error) string {
	fi, lerr := root.Lstat(rel)
	switch {
	case lerr != nil:
		return ""
	case fi.Mode()&fs.ModeSymlink != 0:
		return rel + " is a symbolic link (an output must be a regular file)"
	case fi.IsDir():
		return fmt.Sprintf("%s is a folder (write %s/* to take its files)", rel, rel)
	case !fi.Mode().IsRegular():
		return rel + " is not a regular file"
	}
	return fmt.Sprintf("%s could not be read: %v", rel, withoutPath(err))
}

// stageOutput copies the open output f (of FileInfo fi, named rel, which
// pattern p matched) into stage and returns it, or nil when an earlier
// pattern took it already.
func stageOutput(f *os.File, fi fs.FileInfo, rel, p string, seen map[string]bool, stage string, limit int64) (*outputFile, error) {
	if err := protocol.CheckArtifactName(rel); err != nil {
		return nil, fmt.Errorf("output %q, which %q matches, %v: rename it", rel, p, err)
	}
	if seen[rel] {
		return nil, nil
	}
	seen[rel] = true
	ref := protocol.ArtifactRef{Kind: protocol.ArtifactOutput, Name: rel, Size: fi.Size(), MediaType: mime.TypeByExtension(path.Ext(rel))}
	if limit > 0 && fi.Size() > limit {
		return &outputFile{ref: ref}, nil // fitArtifacts says it is too large
	}
	copied, h, size, err := copyToStage(f, stage, limit)
	if err != nil {
		return nil, fmt.Errorf("output %s: %v", rel, err)
	}
	ref.SHA256, ref.Size = h, size
	return &outputFile{ref: ref, path: copied}, nil
}

// copyToStage copies what r reads into a new file of stage and returns its
// path, SHA-256 and size; a file that grows past limit (> 0) while it is
// copied is cut at limit+1 bytes, which fitArtifacts refuses.
func copyToStage(r io.Reader, stage string, limit int64) (string, string, int64, error) {
	if err := os.MkdirAll(stage, 0o700); err != nil {
		return "", "", 0, err
	}
	tmp, err := os.CreateTemp(stage, "output-*")
	if err != nil {
		return "", "", 0, err
	}
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", "", 0, err
	}
	return tmp.Name(), hex.EncodeToString(h.Sum(nil)), n, nil
}

// readRecommendations reads the recommendations file a succeeded attempt
// left in its directory (ReadRecommendationsFile), through an os.Root of
// the directory and never through a link: the attempt controls the
// folder. No file gives neither a content nor a problem.
func readRecommendations(scratch string) (json.RawMessage, string) {
	root, err := os.OpenRoot(scratch)
	if err != nil {
		return nil, fmt.Sprintf("the attempt's directory could not be read: %v", withoutPath(err))
	}
	defer root.Close()
	return recommendationsOf(protocol.RecommendationsFile, func(limit int64) ([]byte, error) {
		return regularfile.ReadIn(root, protocol.RecommendationsFile, limit)
	})
}

// ReadRecommendationsFile reads a recommendations file as a worker sends
// it: its content when it is JSON of at most
// protocol.MaxRecommendationsBytes, else why it cannot be sent (a path of
// this machine is never in it). A missing file gives neither. It opens the
// file without blocking and reads only a regular file, so a FIFO in its
// place cannot hold the caller (an open of a FIFO for reading waits for a
// writer). The coordinator judges the content; this only checks that the
// request stays JSON and bounded.
func ReadRecommendationsFile(path string) (json.RawMessage, string) {
	return recommendationsOf(filepath.Base(path), func(limit int64) ([]byte, error) { return regularfile.Read(path, limit) })
}

// recommendationsOf checks what read gives (at most limit bytes) as
// ReadRecommendationsFile says, naming the file name.
func recommendationsOf(name string, read func(limit int64) ([]byte, error)) (json.RawMessage, string) {
	raw, err := read(protocol.MaxRecommendationsBytes)
	var notRegular *regularfile.NotRegularError
	var tooLarge *regularfile.TooLargeError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ""
	case errors.As(err, &notRegular):
		// By its name only, and without where a link points.
		return nil, (&regularfile.NotRegularError{Path: name, Mode: notRegular.Mode}).Error()
	case errors.As(err, &tooLarge):
		return nil, (&regularfile.TooLargeError{Path: name, Limit: tooLarge.Limit, Size: tooLarge.Size}).Error()
	case err != nil:
		return nil, fmt.Sprintf("%s could not be read: %v", name, withoutPath(err))
	}
	// Syntax only: a number too large for a float64 is valid JSON.
	var syntax json.RawMessage
	if err := json.Unmarshal(raw, &syntax); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Sprintf("%s is not valid JSON: %v (at byte %d)", name, se, se.Offset)
		}
		return nil, fmt.Sprintf("%s is not valid JSON: %v", name, err)
	}
	return json.RawMessage(raw), ""
}

// withoutPath is err without the path a *fs.PathError names: no path of
// the worker's machine goes into the state.
func withoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// An attempt's logs are files the agent opens and hands to the command
// (its stdout and stderr are those files, so the command writes them
// directly, a follower reads them as they grow, and what the command
// printed stays on disk if the agent dies). What an attempt leaves in the
// work folder that holds nothing goes once its result is accepted
// (tidyAttempt): an empty log is the empty blob, which every coordinator
// holds, so it needs no file (docs/configuration.md, "The work folder").

// makeFolder makes dir and the folders above it that are missing (mode
// 0700), as os.MkdirAll does (a folder that exists is left as it is; a
// file in its place is ENOTDIR), trying again when a folder above it goes
// away meanwhile: tidyAttempt of another attempt of the same task (on
// another worker of the same work folder) removes the task's folder when
// it finds it empty. Unlike os.MkdirAll it tries mkdir first, and looks
// at what is there only when that fails (mkdirs).
func makeFolder(dir string) error {
	err := mkdirs(dir, os.Mkdir)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil {
			if fi.IsDir() {
				return nil
			}
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
	}
	return err
}

// freshFolder makes dir an empty folder (mode 0700), the folders above it
// too when they are missing, as os.RemoveAll and then makeFolder do: one
// mkdir when it does not exist, which is how an attempt finds its scratch
// folder. What is there is removed only when the mkdir finds it exists;
// clearing tells that removing it failed.
func freshFolder(dir string) (clearing bool, err error) {
	err = mkdirs(dir, os.Mkdir)
	if errors.Is(err, fs.ErrExist) {
		if err := os.RemoveAll(dir); err != nil {
			return true, err
		}
		err = makeFolder(dir)
	}
	return false, err
}

// mkdirs makes dir (mode 0700) with mkdir, and the folders above it that
// are missing when mkdir says one is, each tried with mkdir before the one
// above it: up to three times, when one of them goes away meanwhile (as
// three tries of os.MkdirAll). It returns mkdir's error for dir,
// fs.ErrExist when it exists.
func mkdirs(dir string, mkdir func(string, fs.FileMode) error) error {
	for parentsMade := 0; ; parentsMade++ {
		err := mkdir(dir, 0o700)
		if parentsMade == 3 || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := mkdirParents(filepath.Dir(dir), mkdir); err != nil {
			return err
		}
	}
}

// mkdirParents makes the folder dir and those above it that are missing,
// trying mkdir from dir up; one that exists, or comes meanwhile, is not an
// error (mkdirs finds out what it is).
func mkdirParents(dir string, mkdir func(string, fs.FileMode) error) error {
	err := mkdir(dir, 0o700)
	if parent := filepath.Dir(dir); errors.Is(err, fs.ErrNotExist) && parent != dir {
		if err = mkdirParents(parent, mkdir); err == nil {
			err = mkdir(dir, 0o700)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// writeAddress writes the task address file at path unless it exists
// (its content is the same for every attempt of the task), recycled from
// pool when it has a file.
func writeAddress(pool *inodePool, path, task string) error {
	err := pool.writeFile(path, []byte(task+"\n"), true)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	return err
}

// logArtifacts names an attempt's stdout and stderr logs as the result's
// artifacts, with their hashes, and returns the files to upload by hash.
// An empty log (no file, or a regular file of 0 bytes, seen without
// following a link) is artifact.EmptyHash without reading it, and no file
// to upload: every coordinator holds the empty blob, and tidyAttempt
// removes the file. A log that cannot be read is left out, with why in
// problems.
func logArtifacts(paths attemptPaths) (refs []protocol.ArtifactRef, files map[string]string, problems map[string]error) {
	files = map[string]string{}
	for _, lf := range []struct{ name, path string }{{"stdout", paths.stdout}, {"stderr", paths.stderr}} {
		h, size := artifact.EmptyHash, int64(0)
		// No file: the command printed nothing on it (attemptLogs).
		if fi, err := os.Lstat(lf.path); !errors.Is(err, fs.ErrNotExist) && (err != nil || !fi.Mode().IsRegular() || fi.Size() != 0) {
			if h, size, err = artifact.HashFile(lf.path); err != nil {
				if problems == nil {
					problems = map[string]error{}
				}
				problems[lf.name] = err
				continue
			}
			files[h] = lf.path
		}
		refs = append(refs, protocol.ArtifactRef{Kind: protocol.ArtifactLog, Name: lf.name, SHA256: h, Size: size,
			MediaType: "text/plain; charset=utf-8"})
	}
	return refs, files, problems
}

// tidyAttempt removes what an ended attempt left in the work folder that
// holds nothing anyone needs (docs/configuration.md, "The work folder"):
//
//   - once its result was accepted (the coordinator holds its logs by
//     hash), its empty logs, then its log folder when nothing is left in
//     it, then its task's log folder with the address file when no other
//     attempt has logs there. Until then everything stays, for the agent
//     that delivers a spooled result and for wdc logs of a result that
//     never arrived;
//   - its scratch folder, with what is in it, when it succeeded and its
//     result was accepted (its outputs are with the coordinator; a command
//     keeps a file by declaring it an output, or moving it elsewhere);
//     else (failed, lost, refused, not delivered) only when it is empty,
//     so what a failed attempt left is there to look into; then its task's
//     scratch folder when empty;
//   - the copies of its outputs (spooled or delivered by now) and, for a
//     task with outputs, its task's staging folder when empty.
//
// It returns what went wrong other than a folder that is not empty or
// was removed already.
func tidyAttempt(paths attemptPaths, task string, accepted, succeeded, outputs bool) error {
	var errs []error
	note := func(err error) {
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !notEmpty(err) {
			errs = append(errs, err)
		}
	}
	if accepted {
		logsGone := true
		for _, p := range []string{paths.stdout, paths.stderr} {
			// Checked again: a process the attempt detached may have
			// written since the result was made.
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
				err = os.Remove(p)
				note(err)
				logsGone = logsGone && err == nil
			} else if !errors.Is(err, fs.ErrNotExist) {
				logsGone = false
			}
		}
		if !logsGone || !recycleLogFolders(paths) {
			if err := removeFolder(paths.logDir); err == nil {
				note(removeTaskLogs(paths.pool, paths.address, task))
			} else {
				note(err)
			}
		}
	}
	err := removeFolder(paths.scratch)
	if notEmpty(err) && accepted && succeeded {
		err = os.RemoveAll(paths.scratch)
	}
	note(err)
	if !recycleScratchTaskFolder(paths) {
		note(removeFolder(filepath.Dir(paths.scratch)))
	}
	if outputs {
		note(os.RemoveAll(paths.stage))
		note(removeFolder(filepath.Dir(paths.stage)))
	}
	return errors.Join(errs...)
}

// removeTaskLogs removes a task's log folder (the folder of address) when
// it holds nothing but its address file. When another attempt's log
// folder is there, or comes meanwhile, the address file is written again.
func removeTaskLogs(pool *inodePool, address, task string) error {
	pool.putFile(address)
	err := removeFolder(filepath.Dir(address))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if werr := writeAddress(pool, address, task); werr != nil && !errors.Is(werr, fs.ErrNotExist) {
		return werr
	}
	return err // not empty, which the caller passes over
}

// removeFolder removes the folder dir if it is empty (one rmdir; os.Remove
// tries an unlink first).
func removeFolder(dir string) error {
	if err := syscall.Rmdir(dir); err != nil {
		return &fs.PathError{Op: "rmdir", Path: dir, Err: err}
	}
	return nil
}

// notEmpty reports whether err says a folder is not empty (ENOTEMPTY;
// POSIX lets rmdir say EEXIST).
func notEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
