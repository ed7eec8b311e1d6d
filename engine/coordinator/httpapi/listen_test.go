package httpapi

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/protocol"
	"github.com/wdc-dev/wdc/protocol/tlsca"
)

// TestListen: loopback serves HTTP; any other address HTTPS with the
// state's CA (from its folder or given, or a given certificate), reachable by a client that pins it;
// insecure is plain HTTP with a warning; advertise is checked and gets the
// bound port.
func TestListen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, userPin := writeUserCert(t, dir)
	fifo := filepath.Join(dir, "fifo.crt")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	given, err := tlsca.New(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	givenCA := func() (*tlsca.CA, error) { return given, nil }
	cases := []struct {
		name      string
		s         ListenSettings
		scheme    string
		warn      bool
		pinFromCA bool
		pin       string
		urlHas    string
		err       string
	}{
		{name: "loopback", s: ListenSettings{}, scheme: "http"},
		{name: "every interface", s: ListenSettings{Listen: "0.0.0.0:0"}, scheme: "https", pinFromCA: true},
		{name: "insecure", s: ListenSettings{Listen: "0.0.0.0:0", Insecure: true}, scheme: "http", warn: true},
		{name: "given certificate on loopback", s: ListenSettings{Listen: "127.0.0.1", CertFile: certFile, KeyFile: keyFile}, scheme: "https", pin: userPin},
		{name: "advertise without port", s: ListenSettings{Listen: "0.0.0.0:0", Advertise: "https://127.0.0.1"}, scheme: "https", pinFromCA: true, urlHas: "https://127.0.0.1:"},
		{name: "the state's CA given (a backend's)", s: ListenSettings{Listen: "0.0.0.0:0", CA: givenCA}, scheme: "https", pin: given.Fingerprint()},
		{name: "the state's CA not to be had", s: ListenSettings{Listen: "0.0.0.0:0", CA: func() (*tlsca.CA, error) { return nil, errors.New("backend s3://b/k: read the CA") }}, err: "backend s3://b/k: read the CA"},
		{name: "a given CA unused on loopback", s: ListenSettings{CA: func() (*tlsca.CA, error) { return nil, errors.New("called") }}, scheme: "http"},
		{name: "advertise scheme mismatch", s: ListenSettings{Listen: "0.0.0.0:0", Advertise: "http://coordinator"}, err: "says http, but the coordinator serves https"},
		{name: "advertise with a path", s: ListenSettings{Advertise: "http://x/y"}, err: "not a URL of the form"},
		{name: "unreadable certificate", s: ListenSettings{Listen: "127.0.0.1", CertFile: filepath.Join(dir, "nope.crt"), KeyFile: keyFile}, err: "tls certificate"},
		{name: "a FIFO as the certificate", s: ListenSettings{Listen: "127.0.0.1", CertFile: fifo, KeyFile: keyFile}, err: fifo + " is a FIFO (named pipe), not a regular file"},
	}
	ca := filepath.Join(dir, "ca")
	for _, c := range cases {
		c.s.CADir = ca
		ep, err := Listen(c.s, time.Now())
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v; want an error containing %q", c.name, err, c.err)
			}
			if ep != nil {
				ep.Listener.Close()
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !strings.HasPrefix(ep.URL, c.scheme+"://") || ep.TLS != (c.scheme == "https") || (ep.Warning != "") != c.warn ||
			(c.urlHas != "" && !strings.HasPrefix(ep.URL, c.urlHas)) {
			t.Errorf("%s: endpoint %+v", c.name, ep)
		}
		want := c.pin
		if c.pinFromCA {
			cas, err := tlsca.LoadOrCreate(ca)
			if err != nil {
				t.Fatal(err)
			}
			want = cas.Fingerprint()
		}
		if ep.CASHA256 != want {
			t.Errorf("%s: pin %q; want %q", c.name, ep.CASHA256, want)
		}
		if pin, err := c.s.Pin(); err != nil || pin != want {
			t.Errorf("%s: ListenSettings.Pin = %q, %v; want %q", c.name, pin, err, want)
		}
		// Listen is the host given and the port bound.
		_, port, _ := net.SplitHostPort(ep.Listener.Addr().String())
		if host, _, _ := net.SplitHostPort(listenAddress(c.s.Listen)); ep.Listen != net.JoinHostPort(host, port) {
			t.Errorf("%s: Listen = %q; want %q", c.name, ep.Listen, net.JoinHostPort(host, port))
		}
		// A pinned client reaches it by 127.0.0.1 (always a SAN of wdc's certificates).
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })}
		go srv.Serve(ep.Listener)
		url := c.scheme + "://127.0.0.1:" + port
		hc, err := protocol.HTTPClient(url, ep.CASHA256)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		resp, err := hc.Get(url)
		if err != nil || resp.StatusCode != 204 {
			t.Errorf("%s: GET %s = %v, %v", c.name, url, resp, err)
		} else {
			resp.Body.Close()
		}
		srv.Close()
	}
}

// writeUserCert writes a self-signed server certificate for 127.0.0.1 (a
// CA's leaf, with the CA in the chain file) and returns the files and the
// fingerprint agents pin it by (the chain's last certificate).
func writeUserCert(t *testing.T, dir string) (certFile, keyFile, pin string) {
	t.Helper()
	ca, err := tlsca.New(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueServer([]string{"127.0.0.1", "localhost"}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var chain []byte
	for _, der := range leaf.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalECPrivateKey(leaf.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, chain, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, ca.Fingerprint()
}

// TestListenSettingsLoopback: only a loopback listen address (the default
// among them) opens /metrics without a credential.
func TestListenSettingsLoopback(t *testing.T) {
	t.Parallel()
	for listen, want := range map[string]bool{
		"": true, "127.0.0.1": true, "127.0.0.1:7070": true, "localhost": true, "localhost:0": true, "[::1]:7070": true, "::1": true,
		"0.0.0.0:7070": false, "0.0.0.0": false, "10.0.0.5:7070": false, "[::]:0": false, "build-3.example:7070": false, "a:b:c:d": false,
	} {
		if got := (ListenSettings{Listen: listen}).Loopback(); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", listen, got, want)
		}
	}
}

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{"": "127.0.0.1:0", "127.0.0.1": "127.0.0.1:0", "0.0.0.0:7420": "0.0.0.0:7420", "::1": "[::1]:0"} {
		if got := listenAddress(in); got != want {
			t.Errorf("listenAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
