package gateway

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// The client address is ours to work out, not Fiber's: with ProxyHeader set,
// c.IP() returns the LEFTMOST address of X-Forwarded-For, which is whatever
// the client wrote there itself (a proxy appends the peer it saw to the
// right), so a per-IP limit keyed on it is keyed on the attacker's choice.

// parseTrustedProxies reads Config.TrustedProxies: addresses ("10.0.0.1")
// or CIDRs ("10.0.0.0/8"). A single address is a prefix of its full length.
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("gateway: trusted proxy %q is not an address or a CIDR: %w", s, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("gateway: trusted proxy %q is not an address or a CIDR: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trusted reports whether a is one of Config.TrustedProxies.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientKey is what every per-address limit keys on (LimitKey of clientAddr).
func (s *Server) clientKey(c *fiber.Ctx) string { return LimitKey(s.clientAddr(c)) }

// LimitKey is the key of a client address in per-address limits: the address
// itself for IPv4 (an IPv4-mapped IPv6 address counts as its IPv4 address),
// and the /56 prefix for IPv6, written "2001:db8:1:200::/56".
//
// An IPv6 subscriber is given a whole prefix and may pick any address of it
// for every request, so a limit per address, or per /64, limits nothing: a
// home is commonly given a /56 (256 /64s) and a site up to a /48 (RFC 6177
// recommends /48 to /56 per site). The /56 is the coarsest prefix that, as
// providers hand them out, still belongs to one subscriber: keying on the
// /48 would put up to 256 households of a provider that delegates /56s on
// one budget, refusing honest shoppers for a neighbour's script, while a /48
// holder gets at most 256 budgets, not 65,536. A hierarchy (a /64 limited
// inside its /56 inside its /48) would cap that too, but would charge every
// request two or three keys, in Redis for the credentials' limit.
func LimitKey(a netip.Addr) string {
	a = a.Unmap()
	if !a.Is6() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(ipv6LimitBits) // cannot fail: a is IPv6 and 56 <= 128
	return p.String()
}

// ipv6LimitBits is the prefix of an IPv6 address that per-address limits
// key on (LimitKey).
const ipv6LimitBits = 56

// clientAddr is the address of the client, for per-IP limits and logs: the
// peer, unless the peer is a trusted proxy. Then X-Forwarded-For is read from
// the RIGHT, where each proxy appended the peer it saw, and the first address
// that is not a trusted proxy is the client; everything left of it was
// written by the client and is ignored. A malformed entry ends the walk at
// the last address a trusted proxy vouched for.
func (s *Server) clientAddr(c *fiber.Ctx) netip.Addr {
	ip, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	ip = ip.Unmap()
	if len(s.proxies) == 0 || !s.trusted(ip) {
		return ip
	}
	// Several X-Forwarded-For lines are one list, in order (RFC 9110 5.3).
	lines := c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for len(rest) > 0 {
			var entry []byte
			if j := bytes.LastIndexByte(rest, ','); j >= 0 {
				rest, entry = rest[:j], rest[j+1:]
			} else {
				rest, entry = nil, rest
			}
			hop, ok := forwardedAddr(string(bytes.TrimSpace(entry)))
			if !ok {
				return ip
			}
			ip = hop
			if !s.trusted(hop) {
				return ip
			}
		}
	}
	return ip // every hop is a trusted proxy: the farthest one
}

// forwardedAddr parses one X-Forwarded-For entry: an address, or an address
// with a port ("1.2.3.4:5678", "[::1]:80"), which some load balancers write.
func forwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
