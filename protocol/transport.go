package protocol

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/wdc-dev/wdc/protocol/tlsca"
)

// HTTPClient returns the HTTP client to reach the coordinator at server:
// for an https URL with a pin (a SHA-256 fingerprint, as --ca-sha256 takes
// it), one that accepts the server only when its chain holds the pinned
// certificate and the leaf is valid for the URL's host (tlsca.ClientConfig);
// for https without a pin, one that verifies with the system's roots; for
// http, a plain one. Verification is never skipped. The client has its own
// transport and no overall timeout (calls carry deadlines).
//
// Errors: a URL that is not http or https with a host; a pin that is not a
// SHA-256 fingerprint; a pin given for an http URL (it could not be
// checked).
func HTTPClient(server, pin string) (*http.Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("coordinator URL %q: want http://host:port or https://host:port", server)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "http" {
		if pin != "" {
			return nil, fmt.Errorf("coordinator URL %q is plain HTTP, so the CA fingerprint cannot be checked: use the https URL apply prints", server)
		}
		return &http.Client{Transport: tr}, nil
	}
	if pin != "" {
		norm, err := tlsca.ParseFingerprint(pin)
		if err != nil {
			return nil, err
		}
		cfg, err := tlsca.ClientConfig(norm, u.Hostname())
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	return &http.Client{Transport: tr}, nil
}
