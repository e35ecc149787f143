package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// MaxResponseHeaderBytes bounds the headers of a receiver's answer. A
// webhook answer needs a status line and a few headers; net/http's default
// (10 MiB) would let every receiver make each try buffer that much.
const MaxResponseHeaderBytes = 16 << 10

// ClientOptions configure NewClient.
type ClientOptions struct {
	// Timeout bounds one request: connecting, sending, the answer's headers
	// and reading its body.
	Timeout time.Duration
	// PublicOnly refuses to connect to any address that is not public
	// (IsPublicAddr), checked on the IP about to be dialled.
	PublicOnly bool
	// Resolver looks up receivers' names; nil is the system's.
	Resolver *net.Resolver
}

// NewClient returns an HTTP client to send deliveries with. It uses no
// proxy from the environment (the address check must see the receiver's own
// address), does not follow redirects (a 3xx is the answer), refuses an
// answer whose headers pass MaxResponseHeaderBytes, and keeps idle
// connections per receiver so that a busy receiver's deliveries reuse them.
// With PublicOnly, a refused connection fails the request with an error
// holding a *NonPublicAddrError (errors.As finds it).
func NewClient(opts ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Resolver: opts.Resolver}
	if opts.PublicOnly {
		dialer.Control = publicOnlyControl
	}
	return &http.Client{
		Timeout: opts.Timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConns:           512,
			MaxIdleConnsPerHost:    128,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    5 * time.Second,
			ExpectContinueTimeout:  time.Second,
			MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// NonPublicAddrError is an address refused because it is not public: by a
// PublicOnly client when connecting (Addr is what the receiver's name
// resolved to), or by CheckPublicHost.
type NonPublicAddrError struct{ Addr netip.Addr }

func (e *NonPublicAddrError) Error() string {
	return fmt.Sprintf("webhook: %s is not a public address", e.Addr)
}

// publicOnlyControl runs after name resolution, just before each connect,
// with the IP about to be dialled.
func publicOnlyControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: cannot parse dialled address %q", address)
	}
	if !IsPublicAddr(ap.Addr()) {
		return &NonPublicAddrError{Addr: ap.Addr().Unmap()}
	}
	return nil
}

// nonPublicPrefixes are the ranges a PublicOnly client may not reach:
// loopback, private (RFC 1918, ULA), shared (CGNAT), link-local, multicast,
// documentation, benchmarking, reserved, and IPv6 transition ranges that
// can embed any IPv4 address.
var nonPublicPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
		"198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/32",
		"2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// IsPublicAddr reports whether ip is a public unicast address, one a
// PublicOnly client may connect to.
func IsPublicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.Zone() != "" {
		return false
	}
	for _, p := range nonPublicPrefixes {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// ErrLocalhost is CheckPublicHost's answer for "localhost" and the names
// under .localhost.
var ErrLocalhost = errors.New("webhook: the host is localhost")

// CheckPublicHost tells, from its text alone, whether host (a URL's host
// name, without port or brackets) cannot be a public receiver:
// ErrLocalhost for "localhost" or a name under .localhost (in any case,
// with or without a trailing dot), a *NonPublicAddrError for an IP literal
// outside the public ranges, nil otherwise. Names are not resolved: one may
// still resolve to a private address, which a PublicOnly client refuses
// when it connects.
func CheckPublicHost(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return ErrLocalhost
	}
	if ip, err := netip.ParseAddr(h); err == nil && !IsPublicAddr(ip) {
		return &NonPublicAddrError{Addr: ip.Unmap()}
	}
	return nil
}
