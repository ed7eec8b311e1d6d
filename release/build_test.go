package main

import (
	"strings"
	"testing"
)

// TestBinaryNames: a release ships every program for every platform, each
// named PROGRAM-VERSION-OS-ARCH, beside the source archive and bundle
// named after wdc.
func TestBinaryNames(t *testing.T) {
	t.Parallel()
	r := &release{version: "1.2.0"}
	var names []string
	for _, p := range platforms {
		for _, prog := range programs {
			names = append(names, r.binaryName(prog, p))
		}
	}
	want := "wdc-1.2.0-linux-amd64 wdc-agent-1.2.0-linux-amd64 wdc-1.2.0-linux-arm64 wdc-agent-1.2.0-linux-arm64 " +
		"wdc-1.2.0-darwin-amd64 wdc-agent-1.2.0-darwin-amd64 wdc-1.2.0-darwin-arm64 wdc-agent-1.2.0-darwin-arm64"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("binaries:\n got  %s\n want %s", got, want)
	}
	if r.imageName("linux/arm64") != "wdc-agent-1.2.0-linux-arm64.image.tar" {
		t.Errorf("image %s", r.imageName("linux/arm64"))
	}
	if r.archiveName() != "wdc-1.2.0-src.tar.gz" || r.bundleName() != "wdc-1.2.0.bundle" {
		t.Errorf("archive %s, bundle %s", r.archiveName(), r.bundleName())
	}
}
