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

// TestSelectPlatforms: a quick release builds the platforms named, in the
// release's order; an unknown one is refused, naming them all.
func TestSelectPlatforms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		list, want, err string
	}{
		{"", strings.Join(platforms, " "), ""},
		{"linux/amd64", "linux/amd64", ""},
		{"darwin/arm64, linux/amd64", "linux/amd64 darwin/arm64", ""},
		{"linux/amd64,linux/amd64", "linux/amd64", ""},
		{"windows/amd64", "", `"windows/amd64" is not a release platform; the platforms are linux/amd64, linux/arm64, darwin/amd64, darwin/arm64`},
		{",", "", "no platform named"},
	} {
		got, err := selectPlatforms(tc.list)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("selectPlatforms(%q) error %v, want %q", tc.list, err, tc.err)
		case tc.err == "" && (err != nil || strings.Join(got, " ") != tc.want):
			t.Errorf("selectPlatforms(%q) = %v, %v; want %s", tc.list, got, err, tc.want)
		}
	}
}
