package httpapi

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wdc-dev/wdc/internal/regularfile"
	"github.com/wdc-dev/wdc/protocol/tlsca"
)

// ListenSettings say where and how the coordinator serves (docs/configuration.md,
// the wdc block).
type ListenSettings struct {
	// Listen is "host" or "host:port" ("" = 127.0.0.1 on a free port; a
	// host alone gets a free port).
	Listen string
	// Advertise is the URL workers are told to use ("" = derived from the
	// listen address: its host when it names one, else this machine's first
	// non-loopback IPv4 address; the port bound). A URL without a port gets
	// the port bound.
	Advertise string
	// CertFile and KeyFile, when both set, are the PEM server certificate
	// (chain) and key to serve HTTPS with, on any address.
	CertFile, KeyFile string
	// Insecure allows plain HTTP on a non-loopback address (the only way to
	// get it).
	Insecure bool
	// CADir is the folder of the state's own CA (tlsca.LoadOrCreate), used
	// for HTTPS when no certificate is given.
	CADir string
	// CA, when set, gives the state's own CA instead of CADir: a state
	// kept in a backend keeps its CA beside it, so that every machine
	// serves with the one CA that join files pin. It is called only when
	// the CA is needed (HTTPS without a certificate of the user's).
	CA func() (*tlsca.CA, error)
	// CertValidity is how long a certificate issued by that CA lives
	// (default 7 days; an apply that runs longer needs its own certificate).
	CertValidity time.Duration
}

// Endpoint is a listening coordinator address.
type Endpoint struct {
	// Listener accepts connections; with TLS it is already a TLS listener.
	Listener net.Listener
	// Listen is the address it listens on: the listen host as given ("",
	// 0.0.0.0 or :: for every interface) and the port bound.
	Listen string
	// URL is the advertise URL workers use.
	URL string
	// TLS is true when the endpoint serves HTTPS.
	TLS bool
	// CASHA256 is the lowercase hex SHA-256 fingerprint agents pin the
	// server's chain by ("" for HTTP): wdc's CA, or the last certificate of
	// a given chain file.
	CASHA256 string
	// Warning, when set, is a sentence apply prints (plain HTTP on a
	// non-loopback address).
	Warning string
}

// ListensOnLoopback reports whether the endpoint listens on a loopback
// address only: no other machine can connect, whatever it advertises.
func (ep *Endpoint) ListensOnLoopback() bool {
	host, _, err := net.SplitHostPort(ep.Listen)
	return err == nil && IsLoopbackHost(host)
}

// ListensOn says where the endpoint listens, for people: "all interfaces
// (0.0.0.0:47071)" for an unspecified host, else the address
// ("10.0.0.5:47071").
func (ep *Endpoint) ListensOn() string {
	host, _, err := net.SplitHostPort(ep.Listen)
	if ip, perr := netip.ParseAddr(host); err == nil && (host == "" || perr == nil && ip.IsUnspecified()) {
		return "all interfaces (" + ep.Listen + ")"
	}
	return ep.Listen
}

// AdvertisesLoopback reports whether the URL workers are told names a
// loopback host: only a worker on this machine reaches it.
func (ep *Endpoint) AdvertisesLoopback() bool {
	u, err := url.Parse(ep.URL)
	return err == nil && IsLoopbackHost(u.Hostname())
}

// DefaultCertValidity is how long a server certificate from the state's CA
// lives.
const DefaultCertValidity = 7 * 24 * time.Hour

// Listen opens the coordinator's listener: HTTPS when certificate files
// are given, or when the address is not loopback and Insecure is not set
// (with a server certificate from the state's CA, for the listen and
// advertise hosts); plain HTTP otherwise. Errors: a listen or advertise
// address that does not parse, an advertise scheme that does not match
// (http while serving HTTPS or the reverse), unreadable certificate files,
// a CA that cannot be loaded or created, or the listen failing.
func Listen(s ListenSettings, now time.Time) (*Endpoint, error) {
	addr := listenAddress(s.Listen)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", s.Listen, err)
	}
	useTLS := s.ServesTLS()
	var adv *url.URL
	if s.Advertise != "" {
		if adv, err = url.Parse(s.Advertise); err != nil || adv.Host == "" || (adv.Scheme != "http" && adv.Scheme != "https") ||
			(adv.Path != "" && adv.Path != "/") || adv.RawQuery != "" || adv.User != nil {
			return nil, fmt.Errorf("advertise %q is not a URL of the form https://host[:port]", s.Advertise)
		}
		if want := map[bool]string{true: "https", false: "http"}[useTLS]; adv.Scheme != want {
			how := "on a loopback address it serves plain HTTP; give a tls block for HTTPS"
			if useTLS {
				how = "set insecure = true (without a tls block) for plain HTTP"
			}
			return nil, fmt.Errorf("advertise %q says %s, but the coordinator serves %s on %s (%s)", s.Advertise, adv.Scheme, want, addr, how)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("coordinator listen address %q: %w", s.Listen, err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ep := &Endpoint{Listener: ln, Listen: net.JoinHostPort(host, port), TLS: useTLS}
	scheme := map[bool]string{true: "https", false: "http"}[useTLS]
	advHost := advertiseHost(host)
	if adv != nil {
		advHost = adv.Hostname()
		if p := adv.Port(); p != "" {
			port = p
		}
	}
	ep.URL = scheme + "://" + net.JoinHostPort(advHost, port)
	if !useTLS {
		if !IsLoopbackHost(host) {
			ep.Warning = fmt.Sprintf("the coordinator serves plain HTTP on %s (insecure = true): credentials and results cross the network unencrypted", ep.Listen)
		}
		return ep, nil
	}
	var cert tls.Certificate
	if s.CertFile != "" && s.KeyFile != "" {
		if cert, err = loadKeyPair(s.CertFile, s.KeyFile); err != nil {
			ln.Close()
			return nil, fmt.Errorf("tls certificate %s and key %s: %w", s.CertFile, s.KeyFile, err)
		}
		ep.CASHA256 = tlsca.Fingerprint(cert.Certificate[len(cert.Certificate)-1])
	} else {
		ca, err := s.stateCA()
		if err != nil {
			ln.Close()
			return nil, err
		}
		validity := s.CertValidity
		if validity <= 0 {
			validity = DefaultCertValidity
		}
		if cert, err = ca.IssueServer(tlsca.DefaultHosts(host, advHost), now, validity); err != nil {
			ln.Close()
			return nil, err
		}
		ep.CASHA256 = ca.Fingerprint()
	}
	ep.Listener = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	return ep, nil
}

// maxTLSFileBytes is the most read of a tls block's certificate chain or
// key file (docs/configuration.md, "wdc").
const maxTLSFileBytes = 1 << 20

// loadKeyPair is tls.LoadX509KeyPair, but reads each file as a regular
// file of at most maxTLSFileBytes, opened without blocking: a FIFO or a
// device in a file's place is refused, saying what it is.
func loadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := regularfile.Read(certFile, maxTLSFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := regularfile.Read(keyFile, maxTLSFileBytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// ServesTLS reports whether a coordinator with these settings serves HTTPS:
// with certificate files, or on a non-loopback address unless Insecure.
func (s ListenSettings) ServesTLS() bool {
	if s.CertFile != "" && s.KeyFile != "" {
		return true
	}
	host, _, err := net.SplitHostPort(listenAddress(s.Listen))
	return err == nil && !IsLoopbackHost(host) && !s.Insecure
}

// Loopback reports whether the listen address only reaches this machine
// (the default, 127.0.0.1; localhost, ::1): the coordinator then serves
// GET /metrics without a credential (coordinator.Options.MetricsOpen).
func (s ListenSettings) Loopback() bool {
	host, _, err := net.SplitHostPort(listenAddress(s.Listen))
	return err == nil && IsLoopbackHost(host)
}

// Pin returns the SHA-256 fingerprint agents pin a coordinator with these
// settings by, without listening: the last certificate of the tls chain
// file, or the state's CA (CA's, else created in CADir when missing); "" when it
// serves plain HTTP. Errors: unreadable certificate files; a CA that
// cannot be loaded or created.
func (s ListenSettings) Pin() (string, error) {
	switch {
	case !s.ServesTLS():
		return "", nil
	case s.CertFile != "" && s.KeyFile != "":
		cert, err := loadKeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return "", fmt.Errorf("tls certificate %s and key %s: %w", s.CertFile, s.KeyFile, err)
		}
		return tlsca.Fingerprint(cert.Certificate[len(cert.Certificate)-1]), nil
	}
	ca, err := s.stateCA()
	if err != nil {
		return "", err
	}
	return ca.Fingerprint(), nil
}

// stateCA returns the state's own CA: CA's, else the one in CADir
// (created there when missing).
func (s ListenSettings) stateCA() (*tlsca.CA, error) {
	switch {
	case s.CA != nil:
		return s.CA()
	case s.CADir == "":
		return nil, errors.New("serving HTTPS needs a certificate (tls { cert_file, key_file }) or a folder for the state's CA")
	}
	return tlsca.LoadOrCreate(s.CADir)
}

// CAFolder is where the state's own CA lives: the folder "ca" of the work
// folder.
func CAFolder(workDir string) string { return filepath.Join(workDir, "ca") }

// IsLoopbackHost reports whether a listen host only reaches this machine:
// "localhost", an address of 127.0.0.0/8 or ::1.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// advertiseHost derives the host workers use from the listen host: the host
// itself when it names one, else the first non-loopback IPv4 address of an
// interface that is up, else 127.0.0.1.
func advertiseHost(listenHost string) string {
	if ip, err := netip.ParseAddr(listenHost); listenHost != "" && (err != nil || !ip.IsUnspecified()) {
		return listenHost
	}
	ifaces, _ := net.Interfaces()
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.String()
			}
		}
	}
	return "127.0.0.1"
}

// listenAddress turns the listen setting into a net.Listen address:
// "" → 127.0.0.1:0 (a free port), "host" → host:0.
func listenAddress(listen string) string {
	if listen == "" {
		return "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return net.JoinHostPort(listen, "0")
	}
	return listen
}
