package tlsca

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
)

// ClientConfig returns the tls.Config an agent dials the coordinator with
// when it knows the coordinator's CA only by pin, the SHA-256 fingerprint of
// the CA certificate's DER bytes in any form ParseFingerprint accepts.
//
// host is the host part of the coordinator's URL (a DNS name or an IP
// address, brackets allowed, no port): the server certificate must be valid
// for it. It is needed because when an agent dials an IP address, TLS sends
// no server name and the handshake's ConnectionState.ServerName is empty, so
// that the certificate could not otherwise be checked against the address.
// The config's ServerName is set to host, for SNI. An empty host means "the
// ServerName of the connection" (for a config used with several DNS names);
// a connection with neither then fails.
//
// The server is accepted only if, in the chain it presents:
//  1. some certificate's SHA-256 fingerprint equals pin — the CA certificate
//     for a server using this package's certificates, or the leaf itself
//     for a self-signed server certificate;
//  2. the leaf verifies with crypto/x509, with that certificate as the only
//     root and the rest of the chain as intermediates, at the current time,
//     for host, with extended key usage ServerAuth.
//
// InsecureSkipVerify is true only because crypto/tls would otherwise verify
// the chain against the system's roots, which do not hold the private CA,
// and fail before the pin is looked at: the complete verification above is
// done in VerifyConnection instead, which crypto/tls calls on every
// handshake, resumed ones included, and whose error aborts the handshake.
// Do not clear VerifyConnection, and do not copy InsecureSkipVerify to a
// config without it. MinVersion is TLS 1.2.
//
// The errors VerifyConnection returns say what failed, for example "no
// certificate in the server's chain has SHA-256 fingerprint X (the server
// presented: …)" or "the server's certificate is not valid for host H (it
// names …)". ClientConfig itself fails only for an unparsable pin or host.
func ClientConfig(pin, host string) (*tls.Config, error) {
	want, err := ParseFingerprint(pin)
	if err != nil {
		return nil, err
	}
	if host != "" {
		canon, _, err := normalizeHost(host)
		if err != nil {
			return nil, err
		}
		host = canon
	}
	return &tls.Config{
		ServerName:         host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verified in VerifyConnection; see the doc comment
		VerifyConnection: func(cs tls.ConnectionState) error {
			name := host
			if name == "" {
				name = cs.ServerName
			}
			if err := verifyPinned(cs.PeerCertificates, want, name); err != nil {
				return &VerifyError{Err: err}
			}
			return nil
		},
	}, nil
}

// verifyPinned checks a presented chain (leaf first) against the pin
// (normalized) for host.
func verifyPinned(chain []*x509.Certificate, pin, host string) error {
	if len(chain) == 0 {
		return errors.New("tlsca: the server presented no certificate")
	}
	if host == "" {
		return errors.New("tlsca: no host name to check the server's certificate against (an IP address sends none): give the host to tlsca.ClientConfig")
	}
	pinned := -1
	for i, c := range chain {
		if Fingerprint(c.Raw) == pin {
			pinned = i
			break
		}
	}
	if pinned < 0 {
		return fmt.Errorf("tlsca: no certificate in the server's chain has SHA-256 fingerprint %s (the server presented: %s)", pin, describeChain(chain))
	}
	roots := x509.NewCertPool()
	roots.AddCert(chain[pinned])
	intermediates := x509.NewCertPool()
	for i, c := range chain[1:] {
		if i+1 != pinned {
			intermediates.AddCert(c)
		}
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       host,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err == nil {
		return nil
	}
	var hostErr x509.HostnameError
	if errors.As(err, &hostErr) {
		return fmt.Errorf("tlsca: the server's certificate is not valid for host %s (it names %s)", host, describeSANs(chain[0]))
	}
	var authErr x509.UnknownAuthorityError
	if errors.As(err, &authErr) {
		return fmt.Errorf("tlsca: the server's certificate is not signed by the pinned certificate %s: %w", pin, err)
	}
	return fmt.Errorf("tlsca: the server's certificate does not verify against the pinned certificate %s: %w", pin, err)
}

// describeChain lists a chain's fingerprints, each with its subject's
// common name when it has one.
func describeChain(chain []*x509.Certificate) string {
	parts := make([]string, len(chain))
	for i, c := range chain {
		parts[i] = Fingerprint(c.Raw)
		if cn := c.Subject.CommonName; cn != "" {
			parts[i] += fmt.Sprintf(" (%q)", cn)
		}
	}
	return strings.Join(parts, ", ")
}

// describeSANs lists the names and addresses a certificate is valid for.
func describeSANs(c *x509.Certificate) string {
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, net.IP.String(ip))
	}
	if len(names) == 0 {
		return "no host names or addresses"
	}
	return strings.Join(names, ", ")
}

// VerifyError is what the handshake of a ClientConfig fails with when the
// server does not match the pin: retrying cannot help (the server, the pin
// or the host name is wrong), so a caller treats it as final.
type VerifyError struct{ Err error }

// Error returns the reason, e.g. "tlsca: no certificate in the server's
// chain has SHA-256 fingerprint …".
func (e *VerifyError) Error() string { return e.Err.Error() }

// Unwrap returns the reason.
func (e *VerifyError) Unwrap() error { return e.Err }
