// Command release builds a wdc release from a git commit and checks one.
//
//	go run ./release build [-dist DIR] [-version V]
//	go run ./release check [-dist DIR]
//	go run ./release image [-o DIR] [-platform linux/ARCH] [-version V]
//
// build releases the commit at HEAD. It writes into DIR (default dist): the
// binaries of wdc and of wdc-agent (the worker alone) for linux and darwin
// on amd64 and arm64, the OCI image of each linux wdc-agent as a tarball
// (wdc-agent-VERSION-linux-ARCH.image.tar, as image writes it), a source
// archive made with git archive from the
// commit, a git bundle of its history, manifest.json and SHA256SUMS. The
// binaries are built from the source archive, not from the work tree, so a
// release is exactly its commit; -trimpath, CGO_ENABLED=0 and
// -buildvcs=false make the build independent of where it runs.
//
// check makes a release into a temporary folder (or checks DIR when -dist is
// given), verifies SHA256SUMS and manifest.json and that wdc-agent is at
// most 10 MB, builds wdc and wdc-agent for linux/amd64 twice more in two
// clean folders, each with its own empty GOCACHE, and compares the three
// builds of each byte for byte; then it extracts the source archive into
// an empty folder (no .git) and there runs exactly `go build ./cmd/wdc`,
// `go build ./cmd/wdc-agent`, `go vet ./...` and the quickstart with the
// wdc it built.
//
// image (make image) builds wdc-agent of the work tree as a release binary
// and writes its OCI image, FROM scratch with wdc-agent as its entrypoint
// (a Kubernetes pool's agent_image), into DIR (default dist/image): a
// tarball and an OCI image layout, made with go-containerregistry (no
// container daemon), the same bytes for the same binary.
//
// docs/release.md describes the release and why it is plain go build.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(os.Args[2:])
	case "check":
		err = runCheck(os.Args[2:])
	case "image":
		err = runImage(os.Args[2:], runtime.GOARCH)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go run ./release build [-dist DIR] [-version V] [-platforms OS/ARCH,…]\n       go run ./release check [-dist DIR]\n       go run ./release image [-o DIR] [-platform linux/ARCH] [-version V]")
	os.Exit(2)
}

func runBuild(args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	dist := fs.String("dist", "dist", "output folder (emptied first)")
	version := fs.String("version", "", "version to stamp (default: from the latest v* tag, else 0.1.0-dev)")
	only := fs.String("platforms", "", "comma-separated GOOS/GOARCH to build, a quick partial release to try (default: all of "+strings.Join(platforms, ",")+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := newRelease(*version)
	if err != nil {
		return err
	}
	if r.platforms, err = selectPlatforms(*only); err != nil {
		return err
	}
	if len(r.platforms) < len(platforms) {
		fmt.Printf("a partial release, for %s only: not one to publish\n", strings.Join(r.platforms, ", "))
	}
	start := time.Now()
	if err := r.build(*dist); err != nil {
		return err
	}
	fmt.Printf("release %s (commit %s) in %s, %s\n", r.version, r.commit, *dist, time.Since(start).Round(time.Millisecond))
	return nil
}

func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ExitOnError)
	dist := fs.String("dist", "", "a release folder to check (default: make one in a temporary folder)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "wdc-release-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir := *dist
	if dir == "" {
		r, err := newRelease("")
		if err != nil {
			return err
		}
		dir = work + "/dist"
		if err := r.timed("build the release", func() error { return r.build(dir) }); err != nil {
			return err
		}
	}
	if err := check(dir, work); err != nil {
		return errors.New("release check failed: " + err.Error())
	}
	fmt.Println("release check passed")
	return nil
}
