package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// check proves the release in dist, using work for scratch folders:
//
//  1. SHA256SUMS and manifest.json match the files; the linux/amd64
//     binaries' version --json name the manifest's version and commit
//     (when this machine runs them), and wdc-agent weighs at most
//     maxAgentSize;
//  2. linux/amd64, built twice more from the source archive in two clean
//     folders, each with its own empty GOCACHE, is byte for byte the
//     released binaries, wdc's and wdc-agent's;
//  3. in an empty folder (no .git) holding the extracted source archive,
//     exactly `go build ./cmd/wdc`, `go build ./cmd/wdc-agent`, `go vet
//     ./...` and the quickstart (validate, apply, apply again: no changes)
//     with the wdc binary it built succeed.
//
// It does not run the test suite: make test does that before it.
func check(dist, work string) error {
	m, err := verify(dist)
	if err != nil {
		return err
	}
	r := &release{commit: m.Commit, version: m.Version}
	fmt.Printf("  %-44s ok (%d files, commit %s)\n", "verify "+sumsName+" and "+manifestName, len(m.Files)+1, m.Commit)
	if err := checkBinaries(dist, r, m); err != nil {
		return err
	}
	archive := filepath.Join(dist, r.archiveName())
	if err := checkReproducible(dist, work, archive, r); err != nil {
		return err
	}
	return checkSourceArchive(work, archive, r)
}

// checkBinaries checks that the released linux/amd64 binaries say what
// they are (version --json, when this machine runs linux/amd64), and that
// wdc-agent is no larger than maxAgentSize.
func checkBinaries(dist string, r *release, m *manifest) error {
	agent := filepath.Join(dist, r.binaryName("wdc-agent", "linux/amd64"))
	fi, err := os.Stat(agent)
	if err != nil {
		return err
	}
	if fi.Size() > maxAgentSize {
		return fmt.Errorf("%s is %d bytes, more than the %d a worker's download may be", filepath.Base(agent), fi.Size(), maxAgentSize)
	}
	fmt.Printf("  %-44s ok (%d bytes)\n", "size of the linux/amd64 wdc-agent", fi.Size())
	if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
		return nil
	}
	for _, prog := range programs {
		bin := filepath.Join(dist, r.binaryName(prog, "linux/amd64"))
		out, err := output("", nil, bin, "version", "--json")
		if err != nil {
			return err
		}
		var v struct{ Version, Commit, Go, Platform string }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return fmt.Errorf("%s version --json: %w", bin, err)
		}
		if v.Version != m.Version || v.Commit != m.Commit || v.Go != m.Go || v.Platform != "linux/amd64" {
			return fmt.Errorf("%s version --json says %+v; the manifest says version %s, commit %s, %s", bin, v, m.Version, m.Commit, m.Go)
		}
		fmt.Printf("  %-44s ok\n", "version --json of the linux/amd64 "+prog)
	}
	return nil
}

// checkReproducible builds every program for linux/amd64 twice more from
// the source archive, in two clean folders with their own empty GOCACHE,
// and compares them with the released binaries byte for byte.
func checkReproducible(dist, work, archive string, r *release) error {
	for _, n := range []string{"1", "2"} {
		dir := filepath.Join(work, "repro"+n)
		cache := filepath.Join(work, "gocache"+n)
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := extract(archive, dir); err != nil {
			return err
		}
		for _, prog := range programs {
			released, err := os.ReadFile(filepath.Join(dist, r.binaryName(prog, "linux/amd64")))
			if err != nil {
				return err
			}
			out := filepath.Join(work, prog+"-repro"+n)
			if err := r.timed("clean build "+n+" of "+prog+" (empty GOCACHE)", func() error {
				return r.goBuild(filepath.Join(dir, r.base()), prog, "linux/amd64", out, []string{"GOCACHE=" + cache})
			}); err != nil {
				return err
			}
			got, err := os.ReadFile(out)
			if err != nil {
				return err
			}
			if !bytes.Equal(got, released) {
				return fmt.Errorf("clean build %s of linux/amd64 %s differs from the released binary (%d bytes, released %d): the build is not reproducible", n, prog, len(got), len(released))
			}
		}
	}
	fmt.Printf("  %-44s ok\n", "three linux/amd64 builds of each identical")
	return nil
}

// checkSourceArchive extracts the source archive into an empty folder (no
// .git) and there builds every program, vets, and runs the quickstart
// with the wdc it built.
func checkSourceArchive(work, archive string, r *release) error {
	src := filepath.Join(work, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := extract(archive, src); err != nil {
		return err
	}
	tree := filepath.Join(src, r.base())
	if _, err := os.Stat(filepath.Join(tree, ".git")); err == nil {
		return fmt.Errorf("the source archive holds a .git")
	}
	run := func(what string, env []string, name string, args ...string) (string, error) {
		var out string
		err := r.timed(what, func() error {
			var err error
			out, err = output(tree, env, name, args...)
			return err
		})
		return out, err
	}
	for _, prog := range programs {
		if _, err := run("go build ./cmd/"+prog+" (source archive)", nil, "go", "build", "./cmd/"+prog); err != nil {
			return err
		}
	}
	if _, err := run("go vet ./... (source archive)", nil, "go", "vet", "./..."); err != nil {
		return err
	}
	wdc := filepath.Join(tree, "wdc")
	qs := []string{"--chdir", "examples/quickstart"}
	if _, err := run("quickstart: validate", nil, wdc, append(qs, "validate")...); err != nil {
		return err
	}
	out, err := run("quickstart: apply", nil, wdc, append(qs, "apply", "--auto-approve")...)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Apply complete! Tasks: 5 succeeded, 0 failed") {
		return fmt.Errorf("the quickstart did not succeed:\n%s", out)
	}
	if out, err = run("quickstart: apply again (no changes)", nil, wdc, append(qs, "apply")...); err != nil {
		return err
	}
	if !strings.Contains(out, "No changes.") {
		return fmt.Errorf("the second quickstart apply changed something:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(tree, "examples", "quickstart", "out", "MANIFEST")); err != nil {
		return fmt.Errorf("the quickstart wrote no out/MANIFEST: %w", err)
	}
	return nil
}
