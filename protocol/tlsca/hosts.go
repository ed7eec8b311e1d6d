package tlsca

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// DefaultHosts lists the names and addresses a coordinator's server
// certificate should cover when it listens on listenHost and tells workers
// to dial advertiseHost (both host parts without a port; either may be
// empty). In order, without duplicates:
//
//  1. advertiseHost;
//  2. listenHost, unless it is unspecified ("", "0.0.0.0", "::"); if it is,
//     every IP address of every network interface that is up instead;
//  3. 127.0.0.1, ::1 and localhost;
//  4. the name os.Hostname returns, if it is a valid DNS name or address.
//
// IP addresses are written in canonical form and DNS names lower-cased, so
// the result can be passed to CA.IssueServer as it is. A failure to list
// the interfaces or to read the host name only leaves those entries out;
// an advertiseHost or listenHost that is not a valid host is kept, so that
// IssueServer reports it.
func DefaultHosts(listenHost, advertiseHost string) []string {
	return defaultHosts(listenHost, advertiseHost, interfaceAddrs, os.Hostname)
}

// defaultHosts is DefaultHosts with the system's interfaces and host name
// passed in.
func defaultHosts(listenHost, advertiseHost string, ifaceAddrs func() []netip.Addr, hostname func() (string, error)) []string {
	var out []string
	seen := map[string]bool{}
	add := func(h string) {
		h = strings.TrimSpace(h)
		if h == "" {
			return
		}
		if canon, _, err := normalizeHost(h); err == nil {
			h = canon
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	add(advertiseHost)
	if isUnspecified(listenHost) {
		for _, a := range ifaceAddrs() {
			add(a.String())
		}
	} else {
		add(listenHost)
	}
	add("127.0.0.1")
	add("::1")
	add("localhost")
	if name, err := hostname(); err == nil {
		if _, _, err := normalizeHost(name); err == nil {
			add(name)
		}
	}
	return out
}

// isUnspecified reports whether a listen host means "every address".
func isUnspecified(host string) bool {
	host = strings.Trim(strings.TrimSpace(host), "[]")
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsUnspecified()
}

// interfaceAddrs returns the IP addresses of the network interfaces that
// are up, in the order the system lists them; nil if it cannot list them.
func interfaceAddrs() []netip.Addr {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			var ip net.IP
			switch a := a.(type) {
			case *net.IPNet:
				ip = a.IP
			case *net.IPAddr:
				ip = a.IP
			}
			if addr, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, addr.Unmap())
			}
		}
	}
	return out
}

// splitHosts sorts hosts into the DNS names and IP addresses of a
// certificate, dropping empty entries and duplicates.
func splitHosts(hosts []string) (dnsNames []string, ips []net.IP, err error) {
	seen := map[string]bool{}
	for _, h := range hosts {
		if strings.TrimSpace(h) == "" {
			continue
		}
		canon, isIP, err := normalizeHost(h)
		if err != nil {
			return nil, nil, err
		}
		if seen[canon] {
			continue
		}
		seen[canon] = true
		if isIP {
			ips = append(ips, net.IP(netip.MustParseAddr(canon).AsSlice()))
		} else {
			dnsNames = append(dnsNames, canon)
		}
	}
	return dnsNames, ips, nil
}

// normalizeHost returns h's canonical form: an IP address without brackets
// or zone, IPv4-mapped IPv6 addresses as IPv4 (isIP true), or a DNS name
// lower-cased without a trailing dot. Anything else is an error.
func normalizeHost(h string) (canon string, isIP bool, err error) {
	h = strings.TrimSpace(h)
	ipText := h
	if len(ipText) >= 2 && ipText[0] == '[' && ipText[len(ipText)-1] == ']' {
		ipText = ipText[1 : len(ipText)-1]
	}
	if a, err := netip.ParseAddr(ipText); err == nil {
		return a.WithZone("").Unmap().String(), true, nil
	}
	name := strings.TrimSuffix(strings.ToLower(h), ".")
	if !validDNSName(name) {
		hint := ""
		if strings.Contains(h, ":") {
			hint = " (give the host without a port)"
		}
		return "", false, fmt.Errorf("tlsca: host %q is neither an IP address nor a DNS name%s", h, hint)
	}
	return name, false, nil
}

// validDNSName reports whether name (lower case) is a DNS name a
// certificate can carry: dot-separated labels of 1 to 63 letters, digits,
// hyphens and underscores, at most 253 characters, the first label
// optionally "*".
func validDNSName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for i, label := range strings.Split(name, ".") {
		if label == "*" && i == 0 && name != "*" {
			continue
		}
		if label == "" || len(label) > 63 {
			return false
		}
		for j := 0; j < len(label); j++ {
			c := label[j]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
