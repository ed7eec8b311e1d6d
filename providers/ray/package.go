package ray

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/wdc-dev/wdc/providers"
)

// A pool without wdc_path has its agent travel with its jobs: apply
// uploads the agent binary to the head as a Ray package (PUT
// /api/packages/gcs/NAME, what `ray job submit --working-dir` does), and
// each job's runtime_env.working_dir names it, so Ray unpacks it on
// whichever node runs the entrypoint and runs the entrypoint in it.
const (
	// packagedAgent is the binary's name inside the package, and so in
	// the job's working folder; the entrypoint runs it as ./wdc-agent.
	packagedAgent = "wdc-agent"
	// packageUploadTimeout bounds one upload.
	packageUploadTimeout = 5 * time.Minute
)

// zipEpoch is the modification time of the package's one entry: fixed,
// so that one binary always makes the same package.
var zipEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Package is the agent binary as a Ray package: content-addressed, its
// URI is "gcs://_ray_pkg_<first 40 hex digits of the binary's
// SHA-256>.zip", so one binary is uploaded once per head.
type Package struct {
	// Binary is the file uploaded; Size its size and SHA256 its hash.
	Binary string
	Size   int64
	SHA256 string
	// URI is the package's runtime_env URI.
	URI string
}

// packageName is the name of a package in its URI (and in the upload's
// path).
func (pk Package) packageName() string { return pk.URI[len("gcs://"):] }

// AgentBinaryEnv names the environment variable of apply that chooses the
// binary a pool without wdc_path uploads (agentBinary).
const AgentBinaryEnv = "WDC_AGENT_BINARY"

// agentBinary returns the binary a pool without wdc_path uploads: override
// when set, else $WDC_AGENT_BINARY, else wdc-agent beside the running
// executable (make build and the releases put it there), else the running
// executable itself (wdc takes `agent …` too).
func agentBinary(override string) (string, error) {
	if override == "" {
		override = os.Getenv(AgentBinaryEnv)
	}
	if override != "" {
		return override, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("ray: finding the agent to upload: %w", err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", fmt.Errorf("ray: finding the agent to upload: %w", err)
	}
	beside := filepath.Join(filepath.Dir(self), packagedAgent)
	if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return beside, nil
	}
	return self, nil
}

// describePackage hashes the binary at path. Errors: it cannot be read,
// or this wdc is not built for Linux (where Ray nodes run), so the agent
// it would upload could not run there.
func describePackage(path string) (Package, error) {
	if runtime.GOOS != "linux" {
		return Package{}, providers.Permanent(fmt.Errorf("ray: wdc_path is not set, so apply would upload its own agent, but this wdc is built for %s/%s and Ray nodes run Linux: set wdc_path to a wdc-agent on the nodes, or apply from a Linux machine",
			runtime.GOOS, runtime.GOARCH))
	}
	f, err := os.Open(path)
	if err != nil {
		return Package{}, fmt.Errorf("ray: reading the agent to upload: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Package{}, fmt.Errorf("ray: reading the agent to upload %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return Package{Binary: path, Size: n, SHA256: sum, URI: "gcs://_ray_pkg_" + sum[:40] + ".zip"}, nil
}

// zipPackage makes the package's zip: one entry, packagedAgent, mode
// 0755 (Ray restores the mode when it unpacks), deflated, with a fixed
// time. The binary must still hash to pk.SHA256.
func zipPackage(pk Package) ([]byte, error) {
	data, err := os.ReadFile(pk.Binary)
	if err != nil {
		return nil, fmt.Errorf("ray: reading the agent to upload: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pk.SHA256 {
		return nil, fmt.Errorf("ray: the agent to upload, %s, changed since it was hashed", pk.Binary)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	hdr := &zip.FileHeader{Name: packagedAgent, Method: zip.Deflate, Modified: zipEpoch}
	hdr.SetMode(0o755)
	w, err := zw.CreateHeader(hdr)
	if err == nil {
		_, err = w.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("ray: packing the agent: %w", err)
	}
	return buf.Bytes(), nil
}

// packageFor returns the agent package of the provider (describePackage
// of agentBinary), hashed once per process.
func (p *Provider) packageFor() (Package, error) {
	p.pkgMu.Lock()
	defer p.pkgMu.Unlock()
	if p.pkg != nil {
		return *p.pkg, nil
	}
	path, err := agentBinary(p.AgentBinary)
	if err != nil {
		return Package{}, err
	}
	pk, err := describePackage(path)
	if err != nil {
		return Package{}, err
	}
	p.pkg = &pk
	return pk, nil
}

// ensurePackage makes sure the head c talks to has the agent's package,
// uploading it when the head does not (GET, then PUT, as Ray's SDK does;
// the GET also pins the package on the head for a while, so it is not
// collected before the job that names it is submitted). It says what it
// did, for the launch log: "uploaded …" or "… was on the head already".
// Once a package is on a head, later launches of the process do not ask
// again. Errors: the head refuses the upload (too large, no permission),
// as providers.ErrPermanent with Ray's words.
func (p *Provider) ensurePackage(ctx context.Context, c *Client) (Package, string, error) {
	pk, err := p.packageFor()
	if err != nil {
		return Package{}, "", err
	}
	p.pkgMu.Lock()
	defer p.pkgMu.Unlock()
	key := c.Address + " " + pk.URI
	if p.uploaded[key] {
		return pk, fmt.Sprintf("the agent's package %s is on %s", pk.URI, c.Address), nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	exists, err := c.PackageExists(cctx, pk.URI)
	cancel()
	if err != nil {
		return Package{}, "", fmt.Errorf("ray: asking %s for the agent's package %s: %w", c.Address, pk.URI, err)
	}
	how := fmt.Sprintf("the agent's package %s (%s, %d bytes) was on %s already", pk.URI, pk.Binary, pk.Size, c.Address)
	if !exists {
		data, err := zipPackage(pk)
		if err != nil {
			return Package{}, "", err
		}
		uctx, cancel := context.WithTimeout(ctx, packageUploadTimeout)
		err = c.UploadPackage(uctx, pk.URI, data)
		cancel()
		if err != nil {
			err = fmt.Errorf("ray: %s refused the agent's package %s (%d bytes zipped, from %s): %w; set wdc_path to a wdc-agent installed on the Ray nodes instead",
				c.Address, pk.URI, len(data), pk.Binary, err)
			var he *HTTPError
			if errors.As(err, &he) || errors.Is(err, ErrUnauthorized) {
				err = providers.Permanent(err) // Ray said no: it will say so again
			}
			return Package{}, "", err
		}
		how = fmt.Sprintf("uploaded the agent's package %s (%s, %d bytes, %d zipped) to %s", pk.URI, pk.Binary, pk.Size, len(data), c.Address)
	}
	if p.uploaded == nil {
		p.uploaded = map[string]bool{}
	}
	p.uploaded[key] = true
	return pk, how, nil
}

// packageBody describes the agent's package for the plan: how the agent
// travels to the Ray nodes.
func packageBody(pk Package) string {
	return fmt.Sprintf("# the agent travels with the jobs: PUT /api/packages/gcs/%s unless the head has it\n"+
		"binary: %s\nsize: %d\nsha256: %s\nruntime_env.working_dir: %s\nentrypoint: ./%s agent …\n",
		pk.packageName(), pk.Binary, pk.Size, pk.SHA256, pk.URI, packagedAgent)
}
