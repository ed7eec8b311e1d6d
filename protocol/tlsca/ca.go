package tlsca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/google/renameio/v2"

	"github.com/wdc-dev/wdc/internal/regularfile"
)

// File names LoadOrCreate uses inside the folder it is given.
const (
	// CertFile holds the CA certificate as one PEM "CERTIFICATE" block,
	// mode 0644.
	CertFile = "ca.crt"
	// KeyFile holds the CA's private key as one PEM "PRIVATE KEY" (PKCS #8)
	// block, mode 0600. An "EC PRIVATE KEY" (SEC 1) block is read too.
	KeyFile = "ca.key"
	// LockFile is locked while a CA is being created, so that concurrent
	// callers create exactly one. It stays in the folder afterwards, empty.
	LockFile = "ca.lock"
)

// caYears is how long a new CA certificate is valid, in calendar years.
const caYears = 10

// backdate is how far before "now" a new certificate's NotBefore lies, so
// that a peer whose clock is a little behind still accepts it.
const backdate = time.Minute

// CA is a certificate authority that signs the coordinator's server
// certificates: a self-signed CA certificate and its ECDSA private key
// (P-256 when this package created it). Its methods are safe for
// concurrent use; do not modify the exported fields.
type CA struct {
	// Cert is the parsed CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert as one PEM "CERTIFICATE" block, as LoadOrCreate
	// writes it to CertFile.
	CertPEM []byte

	key *ecdsa.PrivateKey
}

// New creates a CA in memory, writing nothing: a fresh ECDSA P-256 key and a
// self-signed certificate with subject CN "wdc coordinator CA <8 hex
// digits>", a random 128-bit serial, NotBefore now minus one minute and
// NotAfter ten years after now, key usage CertSign and CRLSign, and basic
// constraints CA:true with a maximum path length of 0 (it signs leaves
// only). An error means the system's random source failed.
func New(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tlsca: generating the CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "wdc coordinator CA " + hex.EncodeToString(id)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(caYears, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tlsca: creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("tlsca: parsing the new CA certificate: %w", err)
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:     key,
	}, nil
}

// LoadOrCreate returns the CA kept in dir as CertFile and KeyFile, creating
// it (with New and the current time) when neither file exists. dir is
// created, mode 0700, if missing.
//
// New files are written to a temporary file, synced and renamed into place,
// the key (mode 0600) before the certificate (mode 0644). Callers that race
// on a fresh dir — goroutines or processes — take turns on LockFile
// (flock(2), released by the kernel if the holder dies): exactly one
// creates the CA and the others load it. Loading an existing CA takes no
// lock and writes nothing.
//
// It refuses, with an error naming the file and what to do:
//   - only one of the two files exists;
//   - KeyFile grants any permission to group or others (the message says
//     "chmod 600 <path>");
//   - a file holds no PEM block of the expected type, or its contents do
//     not parse, or the key is not an ECDSA key;
//   - the key is not the certificate's;
//   - the certificate is not a CA certificate (basic constraints CA:true
//     and key usage CertSign).
//
// It does not check the certificate's validity period; IssueServer does.
func LoadOrCreate(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	haveCert, haveKey, err := present(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	if haveCert && haveKey {
		return load(certPath, keyPath)
	}
	// Neither or one: either nobody created the CA yet, or someone is
	// creating it right now (the key is renamed into place before the
	// certificate). Decide under the lock.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, LockFile))
	if err != nil {
		return nil, err
	}
	defer unlock()
	haveCert, haveKey, err = present(certPath, keyPath)
	if err != nil {
		return nil, err
	}
	switch {
	case haveCert && haveKey:
		return load(certPath, keyPath)
	case haveCert:
		return nil, onlyOne(certPath, keyPath)
	case haveKey:
		return nil, onlyOne(keyPath, certPath)
	}
	ca, err := New(time.Now())
	if err != nil {
		return nil, err
	}
	if err := ca.write(certPath, keyPath); err != nil {
		return nil, err
	}
	return ca, nil
}

// Fingerprint returns the lowercase hex SHA-256 of the CA certificate's DER
// bytes (64 characters): the value agents pin with --ca-sha256.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert.Raw) }

// IssueServer signs a fresh certificate for a TLS server reachable as hosts
// and returns it ready for tls.Config.Certificates: Certificate holds the
// leaf's DER and then the CA certificate's, so that a client that knows only
// the CA's fingerprint finds it in the chain; PrivateKey is the leaf's new
// ECDSA P-256 key; Leaf is the parsed leaf.
//
// Each host is an IP address (v4 or v6, brackets and a zone allowed; it
// becomes an IP SAN) or a DNS name (a DNS SAN, lower-cased, trailing dot
// dropped; a leading "*." label is allowed). Surrounding space is trimmed;
// empty entries and duplicates are ignored. The leaf is valid from now minus
// one minute to now plus validity, or to the CA's own NotAfter if that comes
// first, has a random 128-bit serial, key usage DigitalSignature and
// extended key usage ServerAuth only.
//
// Errors: no host left after dropping empty entries; a host that is neither
// an IP address nor a DNS name (for example one with a port); validity not
// positive; now outside the CA certificate's validity period.
func (ca *CA) IssueServer(hosts []string, now time.Time, validity time.Duration) (tls.Certificate, error) {
	if validity <= 0 {
		return tls.Certificate{}, fmt.Errorf("tlsca: server certificate validity must be positive, not %s", validity)
	}
	dnsNames, ips, err := splitHosts(hosts)
	if err != nil {
		return tls.Certificate{}, err
	}
	if len(dnsNames)+len(ips) == 0 {
		return tls.Certificate{}, errors.New("tlsca: no host names or addresses to issue a server certificate for")
	}
	if now.Before(ca.Cert.NotBefore) || now.After(ca.Cert.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("tlsca: the CA certificate %q is valid from %s to %s, not at %s; create a new CA (agents then need its fingerprint)",
			ca.Cert.Subject.CommonName, ca.Cert.NotBefore.UTC().Format(time.RFC3339), ca.Cert.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: generating a server key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "wdc coordinator"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dnsNames,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: signing the server certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsca: parsing the new server certificate: %w", err)
	}
	return tls.Certificate{
		Certificate: [][]byte{der, ca.Cert.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// randomSerial returns a uniformly random serial number in [1, 2^128).
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("tlsca: generating a serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// present reports which of the two files exist.
func present(certPath, keyPath string) (haveCert, haveKey bool, err error) {
	exists := func(path string) (bool, error) {
		_, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("tlsca: %w", err)
		}
		return true, nil
	}
	if haveCert, err = exists(certPath); err != nil {
		return false, false, err
	}
	haveKey, err = exists(keyPath)
	return haveCert, haveKey, err
}

// onlyOne is the error for a folder holding have but not missing.
func onlyOne(have, missing string) error {
	return fmt.Errorf("tlsca: found %s but not %s: restore the missing file, or remove %s to create a new CA (agents then need its fingerprint)",
		have, missing, have)
}

// maxFileBytes is the most load reads of the CA's certificate or key: each
// is well under a KiB.
const maxFileBytes = 64 << 10

// load reads and checks an existing CA.
func load(certPath, keyPath string) (*CA, error) {
	info, err := os.Stat(keyPath)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("tlsca: %s is not a regular file", keyPath)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("tlsca: %s is accessible by group or others (mode %04o); run chmod 600 %s", keyPath, perm, keyPath)
	}
	certPEM, err := regularfile.Read(certPath, maxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	keyPEM, err := regularfile.Read(keyPath, maxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %w", err)
	}
	return fromPEM(certPEM, keyPEM, certPath, keyPath)
}

// fromPEM makes a CA of a PEM certificate and a PEM key, checking them
// as LoadOrCreate does; certName and keyName say where each came from,
// in errors.
func fromPEM(certPEM, keyPEM []byte, certName, keyName string) (*CA, error) {
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %s: %w", certName, err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("tlsca: %s is not a CA certificate (it needs basic constraints CA:true and key usage CertSign)", certName)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tlsca: %s: %w", keyName, err)
	}
	if pub, ok := cert.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, fmt.Errorf("tlsca: the key in %s does not belong to the certificate in %s", keyName, certName)
	}
	return &CA{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:     key,
	}, nil
}

// MaxBundleSize bounds the bundle ParseBundle reads: a CA's certificate
// and key are well under a KiB each.
const MaxBundleSize = maxFileBytes

// Bundle returns the CA as one PEM document: the certificate's
// "CERTIFICATE" block, then the key's "PRIVATE KEY" (PKCS #8) block. It
// holds the private key: whoever reads it can act as any coordinator of
// the state, so it is kept where only the state's operators reach (a
// backend keeps it beside the state, never in it).
func (ca *CA) Bundle() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, fmt.Errorf("tlsca: encoding the CA key: %w", err)
	}
	return append(bytes.Clone(ca.CertPEM), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...), nil
}

// ParseBundle reads a CA that Bundle wrote (name says where it came
// from, in errors), checking it as LoadOrCreate checks the files: a CA
// certificate first, then its own ECDSA key, and nothing else.
func ParseBundle(data []byte, name string) (*CA, error) {
	if len(data) > MaxBundleSize {
		return nil, fmt.Errorf("tlsca: %s is %d bytes, more than a CA's certificate and key (%d at most)", name, len(data), MaxBundleSize)
	}
	certBlock, rest := pem.Decode(data)
	if certBlock == nil {
		return nil, fmt.Errorf(`tlsca: %s: no PEM "CERTIFICATE" block`, name)
	}
	keyBlock, rest := pem.Decode(rest)
	if keyBlock == nil {
		return nil, fmt.Errorf(`tlsca: %s: no PEM "PRIVATE KEY" block after the certificate`, name)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("tlsca: %s has data after the certificate and the key", name)
	}
	return fromPEM(pem.EncodeToMemory(certBlock), pem.EncodeToMemory(keyBlock), name+" (its certificate)", name+" (its key)")
}

// parseCertPEM parses the first PEM block of data, which must be a
// certificate.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New(`no PEM "CERTIFICATE" block`)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing the certificate: %w", err)
	}
	return cert, nil
}

// parseKeyPEM parses the first PEM block of data, which must be an ECDSA
// private key in PKCS #8 or SEC 1 form.
func parseKeyPEM(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New(`no PEM "PRIVATE KEY" block`)
	}
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the private key: %w", err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("the private key is a %T, not an ECDSA key", k)
		}
		return ek, nil
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the private key: %w", err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf(`the PEM block is %q, not "PRIVATE KEY"`, block.Type)
	}
}

// write puts a new CA's files in place: the key first, then the
// certificate, so that a reader that sees the certificate also sees the
// key. If the certificate cannot be written, the key is removed again.
func (ca *CA) write(certPath, keyPath string) error {
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return fmt.Errorf("tlsca: encoding the CA key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(certPath, ca.CertPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return err
	}
	syncDir(filepath.Dir(certPath))
	return nil
}

// writeFileAtomic writes data to path through a synced temporary file
// renamed into place (renameio), with mode perm whatever the umask.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	if err := renameio.WriteFile(path, data, perm, renameio.WithStaticPermissions(perm)); err != nil {
		return fmt.Errorf("tlsca: writing %s: %w", path, err)
	}
	return nil
}

// syncDir makes the renames in dir durable where the system allows it;
// failing to is not an error (the files are complete either way).
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
