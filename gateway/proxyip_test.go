package gateway

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recordingIPs is a per-IP limiter that lets everything through and keeps
// the addresses it was asked about.
type recordingIPs struct {
	mu  sync.Mutex
	ips []string
}

func (r *recordingIPs) Allow(_ context.Context, ip string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips = append(r.ips, ip)
	return nil
}

func (r *recordingIPs) last(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.ips)
	return r.ips[len(r.ips)-1]
}

// Behind a trusted proxy that appends the peer to X-Forwarded-For (nginx
// $proxy_add_x_forwarded_for, every cloud LB), the leftmost address is the
// one the client wrote itself. Fiber's c.IP() with ProxyHeader returns it, so
// the per-IP credential limit was keyed by a value the attacker chose per
// request. The client is the first address from the right that is not a
// trusted proxy.
func TestForwardedForIsNotSpoofable(t *testing.T) {
	t.Parallel()
	rec := &recordingIPs{}
	b := setup(t, func(c *Config, d *testDeps) {
		c.TrustedProxies = []string{"127.0.0.1"} // the test client is "the proxy"
		d.Gates.Credentials = rec
	})
	// The client sent "X-Forwarded-For: 6.6.6.x"; the proxy appended the
	// address it saw, 9.9.9.9.
	for _, spoof := range []string{"6.6.6.6", "6.6.6.7"} {
		b.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"alice","password":"whatever1"}`,
			"X-Forwarded-For", spoof+", 9.9.9.9")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"9.9.9.9", "9.9.9.9"}, rec.ips,
		"the per-IP limit must key on the address the trusted proxy saw, not on the client's own header")
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	rec := &recordingIPs{}
	b := setup(t, func(c *Config, d *testDeps) {
		c.TrustedProxies = []string{"127.0.0.1", "10.0.0.0/8", "2001:db8:ffff::/48"}
		d.Gates.Credentials = rec
	})
	send := func(b *bundle, lines ...string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.base+"/api/v1/sessions", nil)
		require.NoError(t, err)
		for _, l := range lines {
			req.Header.Add("X-Forwarded-For", l)
		}
		resp, err := b.client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"no header: the peer", nil, "127.0.0.1"},
		{"one proxy", []string{"9.9.9.9"}, "9.9.9.9"},
		{"a chain of trusted proxies", []string{"6.6.6.6, 9.9.9.9, 10.1.2.3, 10.9.9.9"}, "9.9.9.9"},
		{"header lines are one list", []string{"6.6.6.6, 9.9.9.9", "10.1.2.3"}, "9.9.9.9"},
		{"every hop trusted: the farthest", []string{"10.0.0.1, 10.0.0.2"}, "10.0.0.1"},
		{"with a port", []string{"9.9.9.9:4321"}, "9.9.9.9"},
		{"IPv6 with a port: its /56", []string{"[2001:db8::1]:443, 2001:db8:ffff::9"}, "2001:db8::/56"},
		{"IPv6 hosts of one /56 are one client", []string{"2001:db8:1:2aa:aaaa:bbbb:cccc:dddd"}, "2001:db8:1:200::/56"},
		{"IPv4-mapped IPv6", []string{"::ffff:9.9.9.9"}, "9.9.9.9"},
		{"garbage stops at the last trusted hop", []string{"9.9.9.9, not-an-ip, 10.0.0.7"}, "10.0.0.7"},
		{"garbage next to the peer: the peer", []string{"6.6.6.6, junk"}, "127.0.0.1"},
	} {
		send(b, c.lines...)
		require.Equal(t, c.want, rec.last(t), c.name)
	}

	// Without trusted proxies the header is the client's own words: ignored.
	plain := &recordingIPs{}
	direct := setup(t, func(_ *Config, d *testDeps) { d.Gates.Credentials = plain })
	send(direct, "9.9.9.9")
	require.Equal(t, "127.0.0.1", plain.last(t))
}

// Per-address limits key IPv4 by address and IPv6 by /56: one subscriber
// is commonly given a whole /56 and can pick any of its addresses, in any of
// its 256 /64s, for every request.
func TestLimitKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"9.9.9.9", "9.9.9.9"},
		{"127.0.0.1", "127.0.0.1"},
		{"::ffff:9.9.9.9", "9.9.9.9"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"2001:db8::1", "2001:db8::/56"},
		{"2001:db8::2", "2001:db8::/56"},
		{"2001:db8:0:0:ffff:ffff:ffff:ffff", "2001:db8::/56"},
		{"2001:db8:0:1::1", "2001:db8::/56"},
		{"2001:db8:0:ff:ffff:ffff:ffff:ffff", "2001:db8::/56"},
		{"2001:db8:0:100::1", "2001:db8:0:100::/56"},
		{"2001:db8:a:b:c:d:e:f", "2001:db8:a::/56"},
		{"2001:db8:a:bcde:c:d:e:f", "2001:db8:a:bc00::/56"},
		{"fe80::1%eth0", "fe80::/56"},
		{"::1", "::/56"},
		{"64:ff9b::9.9.9.9", "64:ff9b::/56"},
	} {
		require.Equal(t, c.want, LimitKey(netip.MustParseAddr(c.in)), c.in)
	}
}
