package gateway

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/notify"
)

// dialFrom opens a TCP connection to the bundle's gateway from the loopback
// address src.
func (b *bundle) dialFrom(t *testing.T, src string) net.Conn {
	t.Helper()
	c, err := b.tryDialFrom(src)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tryDialFrom is dialFrom for a connection the server may refuse.
func (b *bundle) tryDialFrom(src string) (net.Conn, error) {
	return stacktest.DialFrom(context.Background(), src, strings.TrimPrefix(b.base, "http://"))
}

// refusedFrom reports whether the server closes a new connection from src
// at once, without a request: the reset may even reach the dial.
func (b *bundle) refusedFrom(src string) bool {
	c, err := b.tryDialFrom(src)
	if err != nil {
		return true
	}
	defer c.Close()
	return closedByServer(c)
}

// closedByServer reports whether the server closed c without answering.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(asNetErr(err, &ne) && ne.Timeout())
}

func asNetErr(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

// TestConnsPerAddress: past Config.MaxConnsPerAddr open connections of one
// address, a new one is closed at once, while another address is served; a
// closed connection gives its place back; a trusted proxy is exempt, and
// Config.MaxConns caps every address together.
func TestConnsPerAddress(t *testing.T) {
	b := setup(t, func(c *Config, d *testDeps) {
		c.MaxConnsPerAddr = 4
		c.MaxConns = 10
		c.TrustedProxies = []string{"127.0.0.9"}
	})
	var flood []net.Conn
	for range 4 {
		flood = append(flood, b.dialFrom(t, "127.0.0.2"))
	}
	require.True(t, stacktest.Healthz(flood[0]), "a connection within the cap is served")
	require.True(t, b.refusedFrom("127.0.0.2"), "the fifth connection of 127.0.0.2 is closed at once")
	require.Equal(t, float64(1), metricValue(t, b.srv.conns.refused.WithLabelValues(refusedPerAddr)))
	require.True(t, stacktest.Healthz(b.dialFrom(t, "127.0.0.3")), "another address is served meanwhile")

	require.NoError(t, flood[3].Close())
	require.Eventually(t, func() bool {
		c, err := b.tryDialFrom("127.0.0.2")
		if err != nil {
			return false
		}
		defer c.Close()
		return stacktest.Healthz(c)
	}, 20*time.Second, 50*time.Millisecond, "a closed connection gives its place back")

	// The proxy's clients share its address: it is not held to the cap.
	var proxy []net.Conn
	for range 5 {
		proxy = append(proxy, b.dialFrom(t, "127.0.0.9"))
	}
	for i, c := range proxy {
		require.True(t, stacktest.Healthz(c), "connection %d of the trusted proxy", i)
	}
	// 3 of 127.0.0.2, 1 of 127.0.0.3, 5 of the proxy: 1 place left of
	// MaxConns = 10.
	require.Eventually(t, func() bool {
		return metricValue(t, b.srv.conns.open) == 9
	}, 20*time.Second, 20*time.Millisecond, "open %v", metricValue(t, b.srv.conns.open))
	require.True(t, stacktest.Healthz(b.dialFrom(t, "127.0.0.4")))
	require.True(t, b.refusedFrom("127.0.0.5"), "past MaxConns every address is closed at once")
	require.Equal(t, float64(1), metricValue(t, b.srv.conns.refused.WithLabelValues(refusedTotal)))
}

// flakyListener fails its first accepts with EMFILE, as a process at its
// open-file limit does.
type flakyListener struct {
	net.Listener
	fails atomic.Int64
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptWaitsOutTooManyOpenFiles: Serve keeps serving after accept
// errors that pass (fasthttp alone returns on them), and says once what to do.
func TestAcceptWaitsOutTooManyOpenFiles(t *testing.T) {
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &flakyListener{Listener: ln}
	fl.fails.Store(5)
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(fl) }()

	resp, err := b.client.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, float64(5), metricValue(t, b.srv.conns.retries))
	logs := b.logs.String()
	require.Equal(t, 1, strings.Count(logs, "accept4: too many open files"), "one line per %v, not one per error:\n%s", acceptLogEvery, logs)
	require.Contains(t, logs, "ulimit -n")
	select {
	case err := <-done:
		t.Fatalf("Serve returned on a temporary error: %v", err)
	default:
	}
}

// TestDescriptorCaps: the caps stay below the open-file limit less the
// reserve, and a limit that leaves too little is refused with what to do.
func TestDescriptorCaps(t *testing.T) {
	conns, sockets, err := DescriptorCaps(20_000, 600)
	require.NoError(t, err)
	require.Equal(t, 19_400, conns)
	require.Equal(t, 14_550, sockets)
	conns, sockets, err = DescriptorCaps(1<<20, 600)
	require.NoError(t, err)
	require.Less(t, conns, 1<<20-600+1)
	require.Equal(t, DefaultMaxPublicSockets, sockets)
	_, _, err = DescriptorCaps(600, 580)
	require.ErrorContains(t, err, "ulimit -n")
}

// dialWSFrom opens a socket from the loopback address src, with a token
// when token is not empty.
func (b *wsBundle) dialWSFrom(t *testing.T, src, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	nd := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, NetDial: nd.Dial}
	if token != "" {
		d.Subprotocols = []string{"bearer", token}
	}
	conn, resp, err := d.Dial(b.url(""), nil)
	if conn != nil {
		t.Cleanup(func() { _ = conn.Close() })
	}
	return conn, resp, err
}

func (b *wsBundle) mustDialFrom(t *testing.T, src, token string) *websocket.Conn {
	t.Helper()
	conn, resp, err := b.dialWSFrom(t, src, token)
	require.NoError(t, err, "socket from %s", src)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return conn
}

// TestWSSocketCaps: one address holds at most Live.MaxSocketsPerAddr
// sockets without a token (429) and as many signed in, sockets without a
// token only the part of
// Live.MaxPublicSockets that is not Live.SignedInReserve (503), and a
// shopper still gets a socket when they are all taken.
func TestWSSocketCaps(t *testing.T) {
	b := setupWS(t, notify.HubConfig{}, func(_ *Config, d *testDeps) {
		d.Live.MaxPublicSockets = 6
		d.Live.SignedInReserve = 2
		d.Live.MaxSocketsPerAddr = 3
	})
	var first []*websocket.Conn
	for range 3 {
		first = append(first, b.mustDialFrom(t, "127.0.0.2", ""))
	}
	resp, _, err := dialResp(b.dialWSFrom(t, "127.0.0.2", ""))
	refused(t, resp, err, http.StatusTooManyRequests, "rate_limited")

	b.mustDialFrom(t, "127.0.0.3", "") // the fourth without a token: 6 - 2
	resp, _, err = dialResp(b.dialWSFrom(t, "127.0.0.4", ""))
	refused(t, resp, err, http.StatusServiceUnavailable, "unavailable")

	// The reserve is the shoppers', and sockets without a token do not
	// count against a shopper's at their address either.
	b.mustDialFrom(t, "127.0.0.2", b.shopper)
	b.mustDialFrom(t, "127.0.0.5", b.shopper2)
	resp, _, err = dialResp(b.dialWSFrom(t, "127.0.0.6", ""))
	refused(t, resp, err, http.StatusServiceUnavailable, "unavailable")

	// A closed socket gives its place back.
	require.NoError(t, first[0].Close())
	require.Eventually(t, func() bool {
		conn, resp, err := b.dialWSFrom(t, "127.0.0.2", "")
		if err != nil {
			return false
		}
		defer conn.Close()
		return resp.StatusCode == http.StatusSwitchingProtocols
	}, 20*time.Second, 20*time.Millisecond)
}

// dialResp puts the answer of a dial first, for refused.
func dialResp(_ *websocket.Conn, resp *http.Response, err error) (*http.Response, struct{}, error) {
	return resp, struct{}{}, err
}

// TestWSAnonymousSocketsAreRenewed: a socket without a token is closed with
// 1000 at Live.AnonymousMaxAge (the page connects again), a shopper's is not.
func TestWSAnonymousSocketsAreRenewed(t *testing.T) {
	b := setupWS(t, notify.HubConfig{}, func(_ *Config, d *testDeps) { d.Live.AnonymousMaxAge = time.Second })
	anon := b.mustDialFrom(t, "127.0.0.2", "")
	shopper := b.mustDialFrom(t, "127.0.0.3", b.shopper)
	require.Equal(t, websocket.CloseNormalClosure, readClose(t, anon))
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.dropped.WithLabelValues(dropAged)) == 1 },
		20*time.Second, 10*time.Millisecond)

	require.NoError(t, shopper.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)))
	for f, _ := readFrame(t, shopper); f.Type != "pong"; f, _ = readFrame(t, shopper) {
	}
	require.Equal(t, float64(1), metricValue(t, b.srv.ws.m.open), "the shopper's socket stays open")
}
