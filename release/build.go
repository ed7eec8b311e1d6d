package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// platforms are the release targets, GOOS/GOARCH.
var platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// programs are the binaries of a release, each built from ./cmd/<name> for
// every platform: wdc, and wdc-agent, the worker alone (what pods and Ray
// jobs run).
var programs = []string{"wdc", "wdc-agent"}

// maxAgentSize is the most a released wdc-agent binary may weigh: it is
// downloaded by every pod and Ray job that runs a worker (10 MB).
const maxAgentSize = 10_000_000

// release is one release being made: the commit, the version stamped in,
// and the platforms built (all of platforms unless a quick build asks for
// fewer).
type release struct {
	root      string // the repository's top folder
	commit    string // full hash
	version   string
	platforms []string
}

// selectPlatforms returns the platforms a comma-separated list names, in
// the release's order, or every platform for "". A name that is not a
// release platform is an error listing them.
func selectPlatforms(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return platforms, nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(platforms, p) {
			return nil, fmt.Errorf("%q is not a release platform; the platforms are %s", p, strings.Join(platforms, ", "))
		}
		want[p] = true
	}
	var out []string
	for _, p := range platforms {
		if want[p] {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform named; the platforms are %s", strings.Join(platforms, ", "))
	}
	return out, nil
}

// newRelease resolves HEAD of the repository around the current folder to
// the commit to release, and the version: the given one, else the latest v*
// tag reachable from it (without the v; git describe adds -N-gHASH past the
// tag), else 0.1.0-dev.
func newRelease(version string) (*release, error) {
	root, err := output("", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("a release is made from a git commit, and this is not a git checkout (from a source archive, build with go build ./cmd/wdc): %w", err)
	}
	commit, err := output(root, nil, "git", "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, err
	}
	if version == "" {
		version = "0.1.0-dev"
		if d, err := output(root, nil, "git", "describe", "--tags", "--match", "v[0-9]*", commit); err == nil {
			version = strings.TrimPrefix(d, "v")
		}
	}
	return &release{root: root, commit: commit, version: version, platforms: platforms}, nil
}

// base is the prefix of every file name of the release.
func (r *release) base() string { return "wdc-" + r.version }

// binaryName is the file name of program's binary for platform:
// wdc-VERSION-linux-amd64, wdc-agent-VERSION-linux-amd64.
func (r *release) binaryName(program, platform string) string {
	return program + "-" + r.version + "-" + strings.ReplaceAll(platform, "/", "-")
}

func (r *release) archiveName() string { return r.base() + "-src.tar.gz" }

func (r *release) bundleName() string { return r.base() + ".bundle" }

// build writes the release into dist, which it empties first.
func (r *release) build(dist string) error {
	if err := os.RemoveAll(dist); err != nil {
		return err
	}
	if err := os.MkdirAll(dist, 0o755); err != nil {
		return err
	}
	archive := filepath.Join(dist, r.archiveName())
	if _, err := output(r.root, nil, "git", "archive", "--format=tar.gz", "--prefix="+r.base()+"/", "-o", archive, r.commit); err != nil {
		return err
	}
	// A bundle of the commit's history with its HEAD: `git clone
	// wdc-V.bundle` checks the commit out.
	bundle := filepath.Join(dist, r.bundleName())
	if _, err := output(r.root, nil, "git", "bundle", "create", "-q", bundle, "HEAD"); err != nil {
		return err
	}
	if heads, err := output(r.root, nil, "git", "bundle", "list-heads", bundle); err != nil {
		return err
	} else if !strings.HasPrefix(heads, r.commit+" ") {
		return fmt.Errorf("the bundle's HEAD is %q, not the release commit %s (did HEAD move?)", heads, r.commit)
	}

	src, err := os.MkdirTemp("", "wdc-release-src-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := extract(archive, src); err != nil {
		return err
	}
	tree := filepath.Join(src, r.base())
	for _, p := range r.platforms {
		for _, prog := range programs {
			if err := r.timed("build "+prog+" "+p, func() error {
				return r.goBuild(tree, prog, p, filepath.Join(dist, r.binaryName(prog, p)), nil)
			}); err != nil {
				return err
			}
		}
	}
	for _, p := range platforms {
		if !strings.HasPrefix(p, "linux/") {
			continue
		}
		if err := r.timed("image wdc-agent "+p, func() error {
			img, err := agentImage(filepath.Join(dist, r.binaryName("wdc-agent", p)), p, r.version)
			if err != nil {
				return err
			}
			tag, err := name.NewTag("wdc-agent:" + imageTag(r.version))
			if err != nil {
				return err
			}
			return tarball.WriteToFile(filepath.Join(dist, r.imageName(p)), tag, img)
		}); err != nil {
			return err
		}
	}
	return writeManifest(dist, r.version, r.commit, goVersion())
}

// imageName is the file name of the agent image's tarball for a linux
// platform: wdc-agent-VERSION-linux-amd64.image.tar.
func (r *release) imageName(platform string) string {
	return r.binaryName("wdc-agent", platform) + ".image.tar"
}

// goBuild builds ./cmd/<program> of the source tree for platform into
// out, as a release binary: static, stripped, trimmed of paths, with the
// version and commit stamped in (main.Version, main.Commit). env is added
// to the environment (e.g. a GOCACHE).
func (r *release) goBuild(tree, program, platform, out string, env []string) error {
	goos, goarch, _ := strings.Cut(platform, "/")
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X main.Version=%s -X main.Commit=%s", r.version, r.commit)
	env = append([]string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch, "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local"}, env...)
	_, err = output(tree, env, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", abs, "./cmd/"+program)
	return err
}

// timed runs f and says how long it took.
func (r *release) timed(what string, f func() error) error {
	start := time.Now()
	err := f()
	if err == nil {
		fmt.Printf("  %-44s %s\n", what, time.Since(start).Round(10*time.Millisecond))
	}
	return err
}

// extract unpacks a .tar.gz into dir with tar.
func extract(archive, dir string) error {
	_, err := output("", nil, "tar", "-xzf", archive, "-C", dir)
	return err
}

// goVersion is the version of the go command that builds the release.
func goVersion() string {
	v, err := output("", nil, "go", "env", "GOVERSION")
	if err != nil {
		return "unknown"
	}
	return v
}

// output runs a command in dir (the current folder when ""), with env added
// to this process's environment, and returns its trimmed stdout; a failure
// carries the command and its stderr.
func output(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}
