package tlsca

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestDefaultHosts(t *testing.T) {
	t.Parallel()
	ifaces := func() []netip.Addr {
		return []netip.Addr{
			netip.MustParseAddr("127.0.0.1"),
			netip.MustParseAddr("10.1.2.3"),
			netip.MustParseAddr("::1"),
			netip.MustParseAddr("2001:db8::7"),
			netip.MustParseAddr("10.1.2.3"), // on two interfaces
		}
	}
	named := func() (string, error) { return "Build-7", nil }
	tests := []struct {
		name              string
		listen, advertise string
		hostname          func() (string, error)
		want              []string
	}{
		{"every address", "0.0.0.0", "coordinator.example", named,
			[]string{"coordinator.example", "127.0.0.1", "10.1.2.3", "::1", "2001:db8::7", "localhost", "build-7"}},
		{"every IPv6 address", "::", "10.1.2.3", named,
			[]string{"10.1.2.3", "127.0.0.1", "::1", "2001:db8::7", "localhost", "build-7"}},
		{"every address, bracketed", "[::]", "", named,
			[]string{"127.0.0.1", "10.1.2.3", "::1", "2001:db8::7", "localhost", "build-7"}},
		{"empty listen host", "", "", named,
			[]string{"127.0.0.1", "10.1.2.3", "::1", "2001:db8::7", "localhost", "build-7"}},
		{"one address", "192.0.2.10", "coordinator.example", named,
			[]string{"coordinator.example", "192.0.2.10", "127.0.0.1", "::1", "localhost", "build-7"}},
		{"advertise equals listen", "192.0.2.10", "192.0.2.10", named,
			[]string{"192.0.2.10", "127.0.0.1", "::1", "localhost", "build-7"}},
		{"non-canonical spellings", "0:0:0:0:0:0:0:1", "LOCALHOST.", named,
			[]string{"localhost", "::1", "127.0.0.1", "build-7"}},
		{"listen on a name", "build-7.example", "", named,
			[]string{"build-7.example", "127.0.0.1", "::1", "localhost", "build-7"}},
		{"host name fails", "192.0.2.10", "", func() (string, error) { return "", errors.New("no") },
			[]string{"192.0.2.10", "127.0.0.1", "::1", "localhost"}},
		{"host name not a DNS name", "192.0.2.10", "", func() (string, error) { return "my box", nil },
			[]string{"192.0.2.10", "127.0.0.1", "::1", "localhost"}},
		{"invalid advertise host kept for IssueServer to report", "192.0.2.10", "host:7420", named,
			[]string{"host:7420", "192.0.2.10", "127.0.0.1", "::1", "localhost", "build-7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := defaultHosts(tt.listen, tt.advertise, ifaces, tt.hostname); !slices.Equal(got, tt.want) {
				t.Errorf("defaultHosts(%q, %q) =\n %q\nwant\n %q", tt.listen, tt.advertise, got, tt.want)
			}
		})
	}
}

func TestDefaultHostsOnThisMachine(t *testing.T) {
	t.Parallel()
	hosts := DefaultHosts("0.0.0.0", "")
	for _, want := range []string{"127.0.0.1", "::1", "localhost"} {
		if !slices.Contains(hosts, want) {
			t.Errorf("DefaultHosts = %q, missing %s", hosts, want)
		}
	}
	if _, err := newCA(t, time.Now()).IssueServer(hosts, time.Now(), time.Hour); err != nil {
		t.Errorf("IssueServer(DefaultHosts(...)): %v", err)
	}
}
