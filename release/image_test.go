package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestAgentImage: the agent image is FROM scratch with the binary at
// /wdc-agent (executable) as its entrypoint, for the platform asked; the
// same binary makes the same digest; the tarball and the OCI layout hold
// that image; an image for another system than linux is refused.
func TestAgentImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "wdc-agent")
	if err := os.WriteFile(bin, []byte("\x7fELF a static agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		platform, wantArch string
		wantErr            bool
	}{
		{"linux/amd64", "amd64", false},
		{"linux/arm64", "arm64", false},
		{"darwin/arm64", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.platform, func(t *testing.T) {
			img, err := agentImage(bin, tt.platform, "1.2.3")
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error for an image that is not linux")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != tt.wantArch || !slices.Equal(cf.Config.Entrypoint, []string{"/wdc-agent"}) || cf.Config.Labels["org.opencontainers.image.version"] != "1.2.3" {
				t.Errorf("config %s/%s entrypoint %q labels %v", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.Labels)
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers %d, %v; want 1", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(rc)
			hdr, err := tr.Next()
			if err != nil || hdr.Name != "wdc-agent" || hdr.Mode != 0o755 {
				t.Fatalf("the layer's file: %+v, %v", hdr, err)
			}
			if data, _ := io.ReadAll(tr); string(data) != "\x7fELF a static agent" {
				t.Errorf("the layer holds %q", data)
			}
			if _, err := tr.Next(); err != io.EOF {
				t.Errorf("the layer holds more than the agent: %v", err)
			}
			again, _ := agentImage(bin, tt.platform, "1.2.3")
			d1, _ := img.Digest()
			d2, _ := again.Digest()
			if d1 != d2 {
				t.Errorf("two images of one binary: %s and %s", d1, d2)
			}

			out := t.TempDir()
			digest, err := writeAgentImage(img, "wdc-agent:1.2.3", filepath.Join(out, "i.tar"), filepath.Join(out, "i.oci"))
			if err != nil || digest != d1 {
				t.Fatalf("writeAgentImage = %s, %v; want %s", digest, err, d1)
			}
			fromTar, err := tarball.ImageFromPath(filepath.Join(out, "i.tar"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg, _ := fromTar.ConfigName(); cfg.String() == "" {
				t.Error("the tarball's image has no config")
			}
			lp, err := layout.FromPath(filepath.Join(out, "i.oci"))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := lp.Image(d1); err != nil || got == nil {
				t.Errorf("the OCI layout lacks the image %s: %v", d1, err)
			}
		})
	}
}

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{"1.2.3": "1.2.3", "0.1.0-5-gabc": "0.1.0-5-gabc", "1.0+dirty": "1.0_dirty"} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
