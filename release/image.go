package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// agentImagePath is where the agent image holds wdc-agent, its entrypoint.
const agentImagePath = "/wdc-agent"

// imageEpoch is the creation time of every agent image and of the file
// in it: fixed, so that one binary always makes the same image (the same
// digest).
var imageEpoch = time.Unix(0, 0).UTC()

// agentImage is the OCI image of the static wdc-agent binary bin for
// platform ("linux/amd64"): FROM scratch, one layer holding the binary at
// /wdc-agent (mode 0755, root-owned), which is the entrypoint, so `agent …`
// and `install-agent DEST` are its arguments (a Kubernetes pool's image or
// agent_image). version labels it (org.opencontainers.image.version).
func agentImage(bin, platform, version string) (v1.Image, error) {
	goos, goarch, ok := strings.Cut(platform, "/")
	if !ok || goos != "linux" {
		return nil, fmt.Errorf("an agent image is for linux, not %q", platform)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: strings.TrimPrefix(agentImagePath, "/"), Mode: 0o755, Size: int64(len(data)), ModTime: imageEpoch,
		Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = goos, goarch, v1.Time{Time: imageEpoch}
	cf.Config.Entrypoint = []string{agentImagePath}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "wdc-agent",
		"org.opencontainers.image.version": version,
	}
	cf.History = []v1.History{{Created: v1.Time{Time: imageEpoch}, CreatedBy: "COPY wdc-agent " + agentImagePath, Comment: "wdc-agent " + version}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// writeAgentImage writes img as a tarball (tarPath, which `docker load`
// and `crane push` take, tagged ref) and as an OCI image layout
// (layoutDir, which `crane push`, skopeo and oras take), and returns the
// image's digest.
func writeAgentImage(img v1.Image, ref, tarPath, layoutDir string) (v1.Hash, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		return v1.Hash{}, err
	}
	if err := os.RemoveAll(layoutDir); err != nil {
		return v1.Hash{}, err
	}
	lp, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag.TagStr()})); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// runImage is `go run ./release image`: builds wdc-agent of the work tree
// for linux on this machine's architecture (or -platform), as a release
// binary (static, stripped), and writes its image into -o: a tarball and
// an OCI layout.
func runImage(args []string, goarch string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	out := fs.String("o", "dist/image", "output folder")
	platform := fs.String("platform", "linux/"+goarch, "the image's platform, linux/ARCH")
	version := fs.String("version", "", "version to stamp and tag (default: from the latest v* tag, else 0.1.0-dev)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := newRelease(*version)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(*out, r.binaryName("wdc-agent", *platform))
	if err := r.timed("build wdc-agent "+*platform, func() error { return r.goBuild(r.root, "wdc-agent", *platform, bin, nil) }); err != nil {
		return err
	}
	img, err := agentImage(bin, *platform, r.version)
	if err != nil {
		return err
	}
	base := filepath.Base(bin)
	ref := "wdc-agent:" + imageTag(r.version)
	tarPath, layoutDir := filepath.Join(*out, base+".tar"), filepath.Join(*out, base+".oci")
	digest, err := writeAgentImage(img, ref, tarPath, layoutDir)
	if err != nil {
		return err
	}
	size, err := img.Size()
	if err != nil {
		return err
	}
	fi, err := os.Stat(tarPath)
	if err != nil {
		return err
	}
	fmt.Printf("image %s %s (%s, manifest %d bytes, tarball %d bytes)\n  tarball:    %s\n  OCI layout: %s\n", ref, digest, *platform, size, fi.Size(), tarPath, layoutDir)
	return nil
}

// imageTag is version as an image tag: [A-Za-z0-9_.-], every other
// character "_", at most 128 characters.
func imageTag(version string) string {
	t := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '_'
	}, version)
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}
