package tlsca

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// newCA returns a fresh in-memory CA created at now.
func newCA(t testing.TB, now time.Time) *CA {
	t.Helper()
	ca, err := New(now)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// keyPEM encodes a private key as a PKCS #8 PEM block.
func keyPEM(t testing.TB, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// writeFile writes a file with exactly mode perm.
func writeFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	ca := newCA(t, now)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("basic constraints: IsCA=%v valid=%v MaxPathLen=%d zero=%v, want a CA with path length 0",
			c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("KeyUsage = %v, want CertSign|CRLSign", c.KeyUsage)
	}
	if !regexp.MustCompile(`^wdc coordinator CA [0-9a-f]{8}$`).MatchString(c.Subject.CommonName) {
		t.Errorf("CommonName = %q", c.Subject.CommonName)
	}
	if !c.NotBefore.Equal(now.Add(-time.Minute)) || !c.NotAfter.Equal(now.AddDate(10, 0, 0)) {
		t.Errorf("validity %s – %s, want one minute before now to ten years after", c.NotBefore, c.NotAfter)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v, want a positive 128-bit number", c.SerialNumber)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	block, _ := pem.Decode(ca.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" || !bytes.Equal(block.Bytes, c.Raw) {
		t.Errorf("CertPEM does not hold the certificate")
	}
	sum := sha256.Sum256(c.Raw)
	if got := ca.Fingerprint(); got != hex.EncodeToString(sum[:]) {
		t.Errorf("Fingerprint() = %s, want %x", got, sum)
	}
	if other := newCA(t, now); other.Fingerprint() == ca.Fingerprint() || other.Cert.Subject.CommonName == c.Subject.CommonName {
		t.Errorf("two CAs share a fingerprint or name")
	}
}

func TestIssueServer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := newCA(t, now)
	cert, err := ca.IssueServer([]string{"Coordinator.Example.", "", " 10.0.0.7 ", "[::1]", "coordinator.example", "10.0.0.7", "::ffff:192.0.2.1", "fe80::1%eth0", "*.pool.example"}, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if want := []string{"coordinator.example", "*.pool.example"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNSNames = %q, want %q", leaf.DNSNames, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"10.0.0.7", "::1", "192.0.2.1", "fe80::1"}; !slices.Equal(ips, want) {
		t.Errorf("IPAddresses = %q, want %q", ips, want)
	}
	if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[0], leaf.Raw) || !bytes.Equal(cert.Certificate[1], ca.Cert.Raw) {
		t.Errorf("chain is not [leaf, CA]")
	}
	if !leaf.NotBefore.Equal(now.Add(-time.Minute).Truncate(time.Second)) || !leaf.NotAfter.Equal(now.Add(24*time.Hour).Truncate(time.Second)) {
		t.Errorf("validity %s – %s, want %s – %s", leaf.NotBefore, leaf.NotAfter, now.Add(-time.Minute), now.Add(24*time.Hour))
	}
	if leaf.IsCA || !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) || leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("leaf usage: IsCA=%v ExtKeyUsage=%v KeyUsage=%v", leaf.IsCA, leaf.ExtKeyUsage, leaf.KeyUsage)
	}
	if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v, want a positive 128-bit number", leaf.SerialNumber)
	}
	key, ok := cert.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() || !key.PublicKey.Equal(leaf.PublicKey) {
		t.Errorf("private key %T does not match the leaf or is not P-256", cert.PrivateKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, host := range []string{"coordinator.example", "10.0.0.7", "::1", "w1.pool.example"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("leaf does not verify for %s: %v", host, err)
		}
	}

	again, err := ca.IssueServer([]string{"coordinator.example"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if again.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 || again.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(leaf.PublicKey) {
		t.Errorf("a second certificate reuses the serial or the key")
	}
}

func TestIssueServerCapsAtCAExpiry(t *testing.T) {
	t.Parallel()
	created := time.Now().AddDate(-10, 0, 1) // the CA expires in about a day
	ca := newCA(t, created)
	cert, err := ca.IssueServer([]string{"127.0.0.1"}, time.Now(), 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter = %s, want the CA's %s", cert.Leaf.NotAfter, ca.Cert.NotAfter)
	}
}

func TestIssueServerRefuses(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := newCA(t, now)
	tests := []struct {
		name     string
		hosts    []string
		now      time.Time
		validity time.Duration
		want     string
	}{
		{"no hosts", nil, now, time.Hour, "no host names or addresses"},
		{"only empty hosts", []string{"", "  "}, now, time.Hour, "no host names or addresses"},
		{"host with a port", []string{"coordinator.example:7420"}, now, time.Hour, `host "coordinator.example:7420" is neither an IP address nor a DNS name (give the host without a port)`},
		{"IP with a port", []string{"[::1]:7420"}, now, time.Hour, "give the host without a port"},
		{"host with a space", []string{"two words"}, now, time.Hour, `host "two words" is neither`},
		{"URL", []string{"https://coordinator.example"}, now, time.Hour, "is neither"},
		{"empty label", []string{"a..b"}, now, time.Hour, "is neither"},
		{"zero validity", []string{"127.0.0.1"}, now, 0, "validity must be positive"},
		{"negative validity", []string{"127.0.0.1"}, now, -time.Hour, "validity must be positive"},
		{"before the CA", []string{"127.0.0.1"}, now.Add(-time.Hour), time.Hour, "is valid from"},
		{"after the CA", []string{"127.0.0.1"}, now.AddDate(11, 0, 0), time.Hour, "is valid from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ca.IssueServer(tt.hosts, tt.now, tt.validity)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// fileMode returns path's permission bits.
func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func TestLoadOrCreate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls") // missing: created
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	if m := fileMode(t, keyPath); m != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", KeyFile, m)
	}
	if m := fileMode(t, certPath); m != 0o644 {
		t.Errorf("%s has mode %04o, want 0644", CertFile, m)
	}
	if m := fileMode(t, dir); m != 0o700 {
		t.Errorf("the folder has mode %04o, want 0700", m)
	}
	data, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, ca.CertPEM) {
		t.Errorf("%s differs from CertPEM", CertFile)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{CertFile, KeyFile, LockFile}; !slices.Equal(names, want) {
		t.Errorf("folder holds %q, want %q (no temporary files left)", names, want)
	}

	again, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint() != ca.Fingerprint() {
		t.Errorf("second call: fingerprint %s, want %s", again.Fingerprint(), ca.Fingerprint())
	}
	// The loaded key signs certificates that chain to the certificate.
	cert, err := again.IssueServer([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.Leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("the loaded CA's leaf does not chain to the created CA: %v", err)
	}
}

func TestLoadOrCreateReadsSEC1Keys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newCA(t, time.Now())
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, CertFile), ca.CertPEM, 0o644)
	writeFile(t, filepath.Join(dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
	got, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint() != ca.Fingerprint() {
		t.Errorf("loaded another CA")
	}
}

func TestLoadOrCreateConcurrentGoroutines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 16
	start := make(chan struct{})
	fps := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ca, err := LoadOrCreate(dir)
			if err == nil {
				fps[i] = ca.Fingerprint()
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	checkOneCA(t, dir, fps, errs)
}

// checkOneCA checks that every caller succeeded and got the CA in dir.
func checkOneCA(t *testing.T, dir string, fps []string, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	onDisk, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, fp := range fps {
		if fp != onDisk.Fingerprint() {
			t.Errorf("caller %d got CA %s, the folder holds %s", i, fp, onDisk.Fingerprint())
		}
	}
}

// helperDirEnv names the folder TestLoadOrCreateHelperProcess works on; the
// test does nothing when it is unset.
const helperDirEnv = "WDC_TLSCA_HELPER_DIR"

// TestLoadOrCreateHelperProcess is not a test: TestLoadOrCreateConcurrentProcesses
// runs the test binary on it. It waits for its standard input to close, so
// that all helpers start together, calls LoadOrCreate and prints the
// fingerprint.
func TestLoadOrCreateHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestLoadOrCreateConcurrentProcesses")
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	ca, err := LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("fingerprint=" + ca.Fingerprint() + "\n")
}

func TestLoadOrCreateConcurrentProcesses(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Skipf("cannot find the test binary: %v", err)
	}
	dir := t.TempDir()
	const n = 8
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	procs := make([]*proc, n)
	for i := range procs {
		p := &proc{cmd: exec.Command(exe, "-test.run=^TestLoadOrCreateHelperProcess$", "-test.count=1")}
		p.cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.stdin.Close() }) // never leave a helper waiting
		procs[i] = p
	}
	for _, p := range procs {
		p.stdin.Close() // release them all at once
	}
	fps := make([]string, n)
	errs := make([]error, n)
	for i, p := range procs {
		errs[i] = p.cmd.Wait()
		if errs[i] != nil {
			t.Logf("helper %d:\n%s%s", i, p.stdout.String(), p.stderr.String())
		}
		sc := bufio.NewScanner(&p.stdout)
		for sc.Scan() {
			if fp, ok := strings.CutPrefix(sc.Text(), "fingerprint="); ok {
				fps[i] = fp
			}
		}
	}
	checkOneCA(t, dir, fps, errs)
}

func TestLoadOrCreateRefuses(t *testing.T) {
	t.Parallel()
	ca := newCA(t, time.Now())
	other := newCA(t, time.Now())
	goodKey := keyPEM(t, ca.key)

	leafCert, err := ca.IssueServer([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafCert.Leaf.Raw})
	leafKey := keyPEM(t, leafCert.PrivateKey)
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	type file struct {
		data []byte
		perm os.FileMode
	}
	tests := []struct {
		name      string
		cert, key *file // nil: absent
		want      string
	}{
		{"only the key", nil, &file{goodKey, 0o600}, "found DIR/ca.key but not DIR/ca.crt: restore the missing file, or remove DIR/ca.key"},
		{"only the certificate", &file{ca.CertPEM, 0o644}, nil, "found DIR/ca.crt but not DIR/ca.key"},
		{"key readable by others", &file{ca.CertPEM, 0o644}, &file{goodKey, 0o644}, "DIR/ca.key is accessible by group or others (mode 0644); run chmod 600 DIR/ca.key"},
		{"key readable by the group", &file{ca.CertPEM, 0o644}, &file{goodKey, 0o640}, "(mode 0640); run chmod 600 DIR/ca.key"},
		{"key writable by others", &file{ca.CertPEM, 0o644}, &file{goodKey, 0o602}, "run chmod 600 DIR/ca.key"},
		{"certificate not PEM", &file{[]byte("hello\n"), 0o644}, &file{goodKey, 0o600}, `DIR/ca.crt: no PEM "CERTIFICATE" block`},
		{"certificate PEM of another type", &file{goodKey, 0o644}, &file{goodKey, 0o600}, `DIR/ca.crt: no PEM "CERTIFICATE" block`},
		{"certificate DER broken", &file{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), 0o644}, &file{goodKey, 0o600}, "DIR/ca.crt: parsing the certificate"},
		{"key not PEM", &file{ca.CertPEM, 0o644}, &file{[]byte("hello\n"), 0o600}, `DIR/ca.key: no PEM "PRIVATE KEY" block`},
		{"key PEM of another type", &file{ca.CertPEM, 0o644}, &file{ca.CertPEM, 0o600}, `DIR/ca.key: the PEM block is "CERTIFICATE", not "PRIVATE KEY"`},
		{"key DER broken", &file{ca.CertPEM, 0o644}, &file{pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), 0o600}, "DIR/ca.key: parsing the private key"},
		{"key not ECDSA", &file{ca.CertPEM, 0o644}, &file{keyPEM(t, edKey), 0o600}, "DIR/ca.key: the private key is a ed25519.PrivateKey, not an ECDSA key"},
		{"key of another CA", &file{ca.CertPEM, 0o644}, &file{keyPEM(t, other.key), 0o600}, "the key in DIR/ca.key does not belong to the certificate in DIR/ca.crt"},
		{"certificate not a CA", &file{leafPEM, 0o644}, &file{leafKey, 0o600}, "DIR/ca.crt is not a CA certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tt.cert != nil {
				writeFile(t, filepath.Join(dir, CertFile), tt.cert.data, tt.cert.perm)
			}
			if tt.key != nil {
				writeFile(t, filepath.Join(dir, KeyFile), tt.key.data, tt.key.perm)
			}
			before := snapshot(t, dir)
			_, err := LoadOrCreate(dir)
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error = %v\nwant one containing %q", err, want)
			}
			if after := snapshot(t, dir); !slices.Equal(before, after) {
				t.Errorf("a refused call changed the folder: %q, then %q", before, after)
			}
		})
	}
}

// snapshot lists dir's CA files with their modes and contents.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, name := range []string{CertFile, KeyFile} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, name+" "+info.Mode().String()+" "+Fingerprint(data))
	}
	return out
}

// selfSigned returns a self-signed, non-CA server certificate and key for
// the given IP addresses, valid for an hour around now.
func selfSigned(t testing.TB, ips ...string) (der []byte, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := randomSerial()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// TestBundle: a CA written as a bundle reads back as the same CA, which
// signs servers; a bundle that is not a CA's certificate and own key is
// refused, naming it.
func TestBundle(t *testing.T) {
	t.Parallel()
	ca := newCA(t, time.Now())
	bundle, err := ca.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBundle(bundle, "s3://b/k.ca")
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint() != ca.Fingerprint() || !bytes.Equal(got.CertPEM, ca.CertPEM) {
		t.Fatalf("read back CA %s, want %s", got.Fingerprint(), ca.Fingerprint())
	}
	if _, err := got.IssueServer([]string{"127.0.0.1"}, time.Now(), time.Hour); err != nil {
		t.Fatalf("the CA read back cannot sign: %v", err)
	}

	other := newCA(t, time.Now())
	leaf, err := ca.IssueServer([]string{"127.0.0.1"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leafPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Leaf.Raw})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, `tlsca: s3://b/k.ca: no PEM "CERTIFICATE" block`},
		{"the certificate alone", ca.CertPEM, `s3://b/k.ca: no PEM "PRIVATE KEY" block after the certificate`},
		{"the key first", append(keyPEM(t, ca.key), ca.CertPEM...), `s3://b/k.ca (its certificate): no PEM "CERTIFICATE" block`},
		{"another CA's key", append(bytes.Clone(ca.CertPEM), keyPEM(t, other.key)...), "the key in s3://b/k.ca (its key) does not belong to the certificate in s3://b/k.ca (its certificate)"},
		{"not a CA", append(leafPEM, keyPEM(t, leaf.PrivateKey)...), "s3://b/k.ca (its certificate) is not a CA certificate"},
		{"data after", append(bytes.Clone(bundle), "more"...), "s3://b/k.ca has data after the certificate and the key"},
		{"too big", bytes.Repeat([]byte("x"), MaxBundleSize+1), "more than a CA's certificate and key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseBundle(tc.data, "s3://b/k.ca"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseBundle = %v, want %q", err, tc.want)
			}
		})
	}
}
