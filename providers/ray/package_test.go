package ray

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/providers"
)

// agentFile writes a fake agent binary and returns its path.
func agentFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wdc-agent")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPackageTravel: a pool without wdc_path uploads the agent once per
// binary and head, content-addressed, and its jobs name the package as
// their working_dir and run ./wdc-agent; a head that has the package is
// not sent it again, even by another provider (another apply); a head
// that refuses it fails the launch as ErrPermanent.
func TestPackageTravel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bin := agentFile(t, "#!agent v1\n")
	tests := []struct {
		name       string
		launches   int  // by one provider, then one more by a second
		maxPackage int  // the head's limit (0: none)
		wantPuts   int  // uploads the head got
		permanent  bool // the first launch fails as ErrPermanent
	}{
		{name: "uploaded once for every launch of two applies", launches: 3, wantPuts: 1},
		{name: "refused by the head", launches: 1, maxPackage: 4, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRay(t)
			f.maxPackage = tt.maxPackage
			s := block(f)
			s.WdcPath = ""
			pk, err := describePackage(bin)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(pk.URI, "gcs://_ray_pkg_") || !strings.HasSuffix(pk.URI, ".zip") || len(pk.packageName()) != len("_ray_pkg_.zip")+40 {
				t.Errorf("package URI %q, want gcs://_ray_pkg_<40 hex>.zip", pk.URI)
			}
			launch := func(p *Provider, seq int) error {
				req := request(t, s)
				req.Seq = seq
				resp, err := p.Launch(ctx, req)
				if err != nil {
					return err
				}
				if resp.Argv[0] != "./wdc-agent" {
					t.Errorf("argv %q, want ./wdc-agent first", resp.Argv)
				}
				return nil
			}
			for i, p := range []*Provider{testProvider(t), testProvider(t)} {
				p.AgentBinary = bin
				n := tt.launches
				if i == 1 {
					n = 1
				}
				for seq := 1; seq <= n; seq++ {
					err := launch(p, 10*i+seq)
					if tt.permanent {
						if !errors.Is(err, providers.ErrPermanent) || !strings.Contains(err.Error(), "exceeds the maximum size") || !strings.Contains(err.Error(), "set wdc_path") {
							t.Fatalf("Launch to a head that refuses the package = %v, want ErrPermanent with Ray's words and what to change", err)
						}
						if len(f.submissions) != 0 {
							t.Errorf("a job was submitted without its package")
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := f.count("PUT /api/packages/gcs/" + pk.packageName()); got != tt.wantPuts {
				t.Errorf("%d uploads, want %d", got, tt.wantPuts)
			}
			for _, sub := range f.submissions {
				if sub.RuntimeEnv == nil || sub.RuntimeEnv.WorkingDir != pk.URI || !strings.HasPrefix(sub.Entrypoint, "./wdc-agent agent ") {
					t.Errorf("submission %s: working_dir %+v, entrypoint %q; want the package and ./wdc-agent", sub.SubmissionID, sub.RuntimeEnv, sub.Entrypoint)
				}
			}
			// The package holds the binary as wdc-agent, executable.
			zr, err := zip.NewReader(bytes.NewReader(f.packages[pk.packageName()]), int64(len(f.packages[pk.packageName()])))
			if err != nil || len(zr.File) != 1 || zr.File[0].Name != "wdc-agent" || zr.File[0].Mode().Perm() != 0o755 {
				t.Fatalf("the package: %v, %+v", err, zr)
			}
			rc, _ := zr.File[0].Open()
			got, _ := io.ReadAll(rc)
			if string(got) != "#!agent v1\n" {
				t.Errorf("the packaged binary is %q", got)
			}
		})
	}
}

// TestZipPackageDeterministic: one binary always makes the same package.
func TestZipPackageDeterministic(t *testing.T) {
	pk, err := describePackage(agentFile(t, strings.Repeat("x", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	a, err1 := zipPackage(pk)
	b, err2 := zipPackage(pk)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("two zips of one binary differ (%v, %v)", err1, err2)
	}
}
