package tlsca

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serve starts an HTTPS test server presenting cert that answers "ok".
func serve(t *testing.T, cert tls.Certificate) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	// The client's handshake failures are expected; keep them out of the log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get fetches https://urlHost:port/ with cfg, always dialling srv's
// listener whatever urlHost is, and returns the error or checks the body.
func get(t *testing.T, srv *httptest.Server, cfg *tls.Config, urlHost string) error {
	t.Helper()
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	tr := &http.Transport{
		TLSClientConfig: cfg,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+net.JoinHostPort(urlHost, port)+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		t.Errorf("body = %q, want ok", body)
	}
	return nil
}

func TestClientConfigAgainstServer(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ca := newCA(t, now)
	otherCA := newCA(t, now)
	issue := func(ca *CA, now time.Time, validity time.Duration, hosts ...string) tls.Certificate {
		t.Helper()
		c, err := ca.IssueServer(hosts, now, validity)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	local := issue(ca, now, time.Hour, "127.0.0.1", "::1", "localhost", "coordinator.test")
	namedOnly := issue(ca, now, time.Hour, "coordinator.test")
	oldCA := newCA(t, now.Add(-72*time.Hour))
	expired := issue(oldCA, now.Add(-48*time.Hour), time.Hour, "127.0.0.1")

	// A server with a certificate from another CA that also presents our
	// CA's certificate, which is public: the pin matches, the signature
	// must not.
	impostor := issue(otherCA, now, time.Hour, "127.0.0.1")
	impostor.Certificate = [][]byte{impostor.Certificate[0], ca.Cert.Raw}

	ssDER, ssKey := selfSigned(t, "127.0.0.1")
	selfSignedCert := tls.Certificate{Certificate: [][]byte{ssDER}, PrivateKey: ssKey}

	// A leaf signed by our CA for client authentication only.
	clientOnly := func() tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial, _ := randomSerial()
		tmpl := &x509.Certificate{
			SerialNumber: serial, Subject: pkix.Name{CommonName: "client"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key}
	}()

	upperColons := strings.ToUpper(ca.Fingerprint())
	var pairs []string
	for i := 0; i < len(upperColons); i += 2 {
		pairs = append(pairs, upperColons[i:i+2])
	}

	tests := []struct {
		name    string
		cert    tls.Certificate
		pin     string
		host    string // given to ClientConfig
		urlHost string // in the URL (the dial always reaches the server)
		want    string // "" for success, else part of the error
	}{
		{"CA pin, IPv4", local, ca.Fingerprint(), "127.0.0.1", "127.0.0.1", ""},
		{"CA pin in upper case with colons and prefix", local, "SHA256:" + strings.Join(pairs, ":"), "127.0.0.1", "127.0.0.1", ""},
		{"CA pin, IPv6 in brackets", local, ca.Fingerprint(), "[::1]", "::1", ""},
		{"CA pin, DNS name", local, ca.Fingerprint(), "Coordinator.Test", "coordinator.test", ""},
		{"CA pin, DNS name from the connection", local, ca.Fingerprint(), "", "coordinator.test", ""},
		{"self-signed leaf pinned directly", selfSignedCert, Fingerprint(ssDER), "127.0.0.1", "127.0.0.1", ""},

		{"wrong pin", local, strings.Repeat("ab", 32), "127.0.0.1", "127.0.0.1",
			"no certificate in the server's chain has SHA-256 fingerprint " + strings.Repeat("ab", 32) +
				" (the server presented: " + Fingerprint(local.Certificate[0]) + ` ("wdc coordinator"), ` + ca.Fingerprint() + ` ("` + ca.Cert.Subject.CommonName + `"))`},
		{"another CA's pin", local, otherCA.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"no certificate in the server's chain has SHA-256 fingerprint " + otherCA.Fingerprint()},
		{"IP address not in the certificate", namedOnly, ca.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"the server's certificate is not valid for host 127.0.0.1 (it names coordinator.test)"},
		{"DNS name not in the certificate", local, ca.Fingerprint(), "other.test", "other.test",
			"the server's certificate is not valid for host other.test (it names localhost, coordinator.test, 127.0.0.1, ::1)"},
		{"DNS name from the connection not in the certificate", namedOnly, ca.Fingerprint(), "", "other.test",
			"not valid for host other.test"},
		{"IP address and no host given", local, ca.Fingerprint(), "", "127.0.0.1",
			"no host name to check the server's certificate against"},
		{"expired leaf", expired, oldCA.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"does not verify against the pinned certificate " + oldCA.Fingerprint() + ": x509: certificate has expired"},
		{"leaf from another CA next to the pinned CA", impostor, ca.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"the server's certificate is not signed by the pinned certificate " + ca.Fingerprint()},
		{"leaf for client authentication only", clientOnly, ca.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"does not verify against the pinned certificate"},
		{"self-signed leaf for another address", selfSignedCert, Fingerprint(ssDER), "other.test", "other.test",
			"not valid for host other.test"},
		{"self-signed leaf, CA pin", selfSignedCert, ca.Fingerprint(), "127.0.0.1", "127.0.0.1",
			"no certificate in the server's chain has SHA-256 fingerprint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := serve(t, tt.cert)
			cfg, err := ClientConfig(tt.pin, tt.host)
			if err != nil {
				t.Fatal(err)
			}
			err = get(t, srv, cfg, tt.urlHost)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("error = %v, want success", err)
			case tt.want != "" && err == nil:
				t.Fatalf("connected, want an error containing %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error = %v\nwant one containing %q", err, tt.want)
			}
		})
	}
}

func TestClientConfigSettings(t *testing.T) {
	t.Parallel()
	pin := strings.Repeat("0f", 32)
	cfg, err := ClientConfig(pin, "[::1]")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.InsecureSkipVerify || cfg.VerifyConnection == nil {
		t.Errorf("InsecureSkipVerify=%v with VerifyConnection set=%v, want both", cfg.InsecureSkipVerify, cfg.VerifyConnection != nil)
	}
	if cfg.MinVersion < tls.VersionTLS12 {
		t.Errorf("MinVersion = %x, want at least TLS 1.2", cfg.MinVersion)
	}
	if cfg.ServerName != "::1" {
		t.Errorf("ServerName = %q, want ::1", cfg.ServerName)
	}
	if cfg.RootCAs != nil || cfg.VerifyPeerCertificate != nil {
		t.Errorf("unexpected RootCAs or VerifyPeerCertificate")
	}
	if err := cfg.VerifyConnection(tls.ConnectionState{}); err == nil || !strings.Contains(err.Error(), "presented no certificate") {
		t.Errorf("empty chain: error = %v", err)
	}

	for _, tt := range []struct{ pin, host, want string }{
		{"abc", "127.0.0.1", "is not a SHA-256 fingerprint"},
		{pin, "coordinator.test:7420", "give the host without a port"},
		{pin, "https://coordinator.test", "is neither an IP address nor a DNS name"},
	} {
		if _, err := ClientConfig(tt.pin, tt.host); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ClientConfig(%q, %q) error = %v, want one containing %q", tt.pin, tt.host, err, tt.want)
		}
	}
}
