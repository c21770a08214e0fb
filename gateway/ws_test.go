package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
)

// These tests are about the socket: handshake, snapshot, ping, heartbeats,
// closes. Their hub is real but never started (it only needs Redis for
// pushes, and none are made here); pushes through Redis between two gateway
// instances are tested end to end in cmd/seckill (TestWS*).

// wsBundle is a gateway whose /api/v1/ws is fed by hub.
type wsBundle struct {
	*bundle
	hub *notify.Hub
	reg *prometheus.Registry
}

func setupWS(t *testing.T, cfg notify.HubConfig, mutate ...func(*Config, *testDeps)) *wsBundle {
	t.Helper()
	// Never dialled: the hub is not run.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg.Redis = rdb
	hub, err := notify.NewHub(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { stopHub(hub) })
	reg := prometheus.NewRegistry()
	b := setup(t, append([]func(*Config, *testDeps){func(_ *Config, d *testDeps) {
		d.Live = Live{Feed: hub}
		d.Registerer = reg
	}}, mutate...)...)
	return &wsBundle{bundle: b, hub: hub, reg: reg}
}

// stopHub stops a hub that was never run, as the end of its Run does: with
// its context already ended, Run subscribes to nothing.
func stopHub(h *notify.Hub) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.Run(ctx)
}

func (b *wsBundle) url(query string) string {
	u := "ws" + strings.TrimPrefix(b.base, "http") + "/api/v1/ws"
	if query != "" {
		u += "?" + query
	}
	return u
}

// dial opens a socket; headers are name, value pairs.
func (b *wsBundle) dial(t *testing.T, query string, protocols []string, headers ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, Subprotocols: protocols}
	conn, resp, err := d.Dial(b.url(query), h)
	if conn != nil {
		t.Cleanup(func() { _ = conn.Close() })
	}
	return conn, resp, err
}

func (b *wsBundle) mustDial(t *testing.T, token string) *websocket.Conn {
	t.Helper()
	conn, resp, err := b.dial(t, "", []string{"bearer", token})
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return conn
}

// refused checks a handshake refused before the upgrade with the API's error body.
func refused(t *testing.T, resp *http.Response, err error, status int, code string) {
	t.Helper()
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.NotNil(t, resp)
	body, rerr := io.ReadAll(resp.Body)
	require.NoError(t, rerr)
	requireAPIError(t, resp, body, status, code)
}

// readFrame reads one text frame as a api.Frame.
func readFrame(t *testing.T, conn *websocket.Conn) (api.Frame, []byte) {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	typ, msg, err := conn.ReadMessage()
	require.NoError(t, err)
	require.Equal(t, websocket.TextMessage, typ)
	var f api.Frame
	require.NoError(t, json.Unmarshal(msg, &f), "%s", msg)
	return f, msg
}

// readClose reads until the server's close frame and returns its code.
func readClose(t *testing.T, conn *websocket.Conn) int {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		require.ErrorAs(t, err, &ce, "expected a close frame")
		return ce.Code
	}
}

func TestWSHandshakeRefusals(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{}, func(c *Config, _ *testDeps) {
		c.AllowedOrigins = []string{"https://shop.example"}
	})
	// No token: a public socket (voucher frames only).
	conn, resp, err := b.dial(t, "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.NoError(t, conn.Close())
	// A token that is not valid is refused: the page learns its session ended.
	_, resp, err = b.dial(t, "token=nonsense", nil)
	refused(t, resp, err, http.StatusUnauthorized, "unauthenticated")
	_, resp, err = b.dial(t, "", []string{"bearer", "nonsense"})
	refused(t, resp, err, http.StatusUnauthorized, "unauthenticated")
	// The admin token is not a shopper's.
	_, resp, err = b.dial(t, "token="+testAdminToken, nil)
	refused(t, resp, err, http.StatusUnauthorized, "unauthenticated")

	for _, origin := range []string{"https://evil.example", "null", "http://127.0.0.1:1", "file://"} {
		_, resp, err = b.dial(t, "token="+b.shopper, nil, "Origin", origin)
		refused(t, resp, err, http.StatusForbidden, "forbidden")
	}
	// A foreign page is refused before its token is even looked at.
	_, resp, err = b.dial(t, "", nil, "Origin", "https://evil.example")
	refused(t, resp, err, http.StatusForbidden, "forbidden")

	// The page's own origin, a configured one, and a client that sends none.
	for _, origin := range []string{b.base, strings.ToUpper(b.base), "https://shop.example", ""} {
		var hdr []string
		if origin != "" {
			hdr = []string{"Origin", origin}
		}
		conn, resp, err := b.dial(t, "token="+b.shopper, nil, hdr...)
		require.NoError(t, err, "origin %q", origin)
		require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
		require.NoError(t, conn.Close())
	}

	// Not a WebSocket handshake at all.
	r, body := b.do(t, "GET", "/api/v1/ws?token="+b.shopper, "")
	requireAPIError(t, r, body, http.StatusBadRequest, "invalid_input")
	r, body = b.do(t, "POST", "/api/v1/ws", "")
	requireAPIError(t, r, body, http.StatusMethodNotAllowed, "method_not_allowed")
	// Refused handshakes never hold a subscription.
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.open) == 0 }, 5*time.Second, 10*time.Millisecond)
}

func TestWSWithoutFeedIsUnavailable(t *testing.T) {
	t.Parallel()
	b := &wsBundle{bundle: setup(t)}
	_, resp, err := b.dial(t, "token="+b.shopper, nil)
	refused(t, resp, err, http.StatusServiceUnavailable, "unavailable")
}

func TestWSHubFullIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{MaxSubscriptions: 1})
	b.mustDial(t, b.shopper)
	_, resp, err := b.dial(t, "token="+b.shopper2, nil)
	refused(t, resp, err, http.StatusServiceUnavailable, "unavailable")
}

func TestWSSnapshotPingAndSameShapeAsREST(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{})
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(id, user int64, st orders.Status, age time.Duration) orders.Order {
		o := orders.Order{ID: id, VoucherID: b.onSale.ID, UserID: user, Quantity: 1, AmountCents: 500, Status: st, CreatedAt: now.Add(-age)}
		if st != orders.StatusReserved {
			o.PayDeadline = o.CreatedAt.Add(15 * time.Minute)
		}
		return o
	}
	b.orders.orders = []orders.Order{
		mk(9_000_000_000_000_003, 42, orders.StatusReserved, time.Second),
		mk(9_000_000_000_000_002, 42, orders.StatusPaid, 2*time.Second),
		mk(9_000_000_000_000_001, 42, orders.StatusCreated, 3*time.Second),
		mk(9_000_000_000_000_004, 42, orders.StatusCancelled, 4*time.Second),
		mk(9_000_000_000_000_005, 43, orders.StatusCreated, 5*time.Second),
	}

	conn, resp, err := b.dial(t, "", []string{"bearer", b.shopper})
	require.NoError(t, err)
	require.Equal(t, "bearer", resp.Header.Get("Sec-WebSocket-Protocol"), "browsers drop a socket whose subprotocol is not echoed")

	// First every voucher not ended, byte for byte what GET
	// /api/v1/vouchers/{id} answers, in a frame.
	f, raw := readFrame(t, conn)
	require.Equal(t, "voucher", f.Type)
	r, body := b.do(t, "GET", fmt.Sprintf("/api/v1/vouchers/%d", b.onSale.ID), "")
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.Equal(t, `{"type":"voucher","voucher":`+string(body)+`}`, string(raw))

	// Then the non-final orders of user 42 only, oldest first, then nothing more.
	want := []string{"9000000000000001", "9000000000000003"}
	for _, id := range want {
		f, raw := readFrame(t, conn)
		require.Equal(t, api.FrameOrder, f.Type)
		require.Equal(t, id, f.Order.OrderID)
		// Byte for byte what GET /api/v1/orders/{id} answers, in a frame.
		r, body := b.do(t, "GET", "/api/v1/orders/"+id, "", "Authorization", bearerOf(b.shopper))
		require.Equal(t, http.StatusOK, r.StatusCode)
		require.JSONEq(t, `{"type":"order","order":`+string(body)+`}`, string(raw))
	}

	require.NoError(t, conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)))
	_, raw = readFrame(t, conn)
	require.JSONEq(t, api.PongFrame, string(raw))
	// Counted once written, which may be a moment after the client read it.
	require.Eventually(t, func() bool {
		return metricValue(t, b.srv.ws.m.snapshots) == 3 && metricValue(t, b.srv.ws.m.pongs) == 1
	}, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, 1.0, metricValue(t, b.srv.ws.m.open))

	// A client's close is answered, and the socket is gone.
	require.NoError(t, conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")))
	require.Equal(t, websocket.CloseNormalClosure, readClose(t, conn))
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.open) == 0 }, 5*time.Second, 10*time.Millisecond)

	// The token as a query parameter works too, and echoes no subprotocol.
	conn, resp, err = b.dial(t, "token="+b.shopper2, nil)
	require.NoError(t, err)
	require.Empty(t, resp.Header.Get("Sec-WebSocket-Protocol"))
	f, _ = readFrame(t, conn)
	require.Equal(t, "voucher", f.Type)
	f, _ = readFrame(t, conn)
	require.Equal(t, "9000000000000005", f.Order.OrderID)
	require.Equal(t, "43", f.Order.UserID)
}

func TestWSBadClientMessagesClose(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{})
	cases := []struct {
		name string
		typ  int
		msg  string
		code int
	}{
		{"unknown type", websocket.TextMessage, `{"type":"subscribe"}`, websocket.ClosePolicyViolation},
		{"not JSON", websocket.TextMessage, `ping`, websocket.ClosePolicyViolation},
		{"binary", websocket.BinaryMessage, `{"type":"ping"}`, websocket.CloseUnsupportedData},
		{"too large", websocket.TextMessage, `{"type":"ping","pad":"` + strings.Repeat("x", notify.MaxClientMessage) + `"}`, websocket.CloseMessageTooBig},
	}
	for _, tc := range cases {
		conn := b.mustDial(t, b.shopper)
		require.NoError(t, conn.WriteMessage(tc.typ, []byte(tc.msg)))
		require.Equal(t, tc.code, readClose(t, conn), tc.name)
	}
	require.Eventually(t, func() bool {
		return metricValue(t, b.srv.ws.m.dropped.WithLabelValues(dropProtocol)) == float64(len(cases))
	}, 5*time.Second, 10*time.Millisecond, "dropped %v open %v", metricValue(t, b.srv.ws.m.dropped.WithLabelValues(dropProtocol)), metricValue(t, b.srv.ws.m.open))
}

func TestWSHeartbeat(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{}, func(_ *Config, d *testDeps) {
		d.Live.PingInterval = 50 * time.Millisecond
		d.Live.ReadTimeout = 400 * time.Millisecond
	})

	// A live client answers the server's pings (the client library does it
	// while reading) and stays connected well past ReadTimeout.
	alive := b.mustDial(t, b.shopper)
	var pings atomic.Int64
	alive.SetPingHandler(func(data string) error {
		pings.Add(1)
		return alive.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() {
		for {
			if _, _, err := alive.ReadMessage(); err != nil {
				return
			}
		}
	}()

	// A dead one (never reads, so never pongs) is closed after ReadTimeout.
	dead := b.mustDial(t, b.shopper2)
	time.Sleep(time.Second)
	require.Equal(t, websocket.ClosePolicyViolation, readClose(t, dead))
	// Counted once the handler ends, a moment after the close frame left.
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.dropped.WithLabelValues(dropIdle)) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Greater(t, pings.Load(), int64(5))
	require.Equal(t, 1.0, metricValue(t, b.srv.ws.m.open), "the live client is still connected")
}

func TestWSReplacedAndHubStopped(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{MaxPerUser: 1})
	first := b.mustDial(t, b.shopper)
	b.mustDial(t, b.shopper) // the same user again: the first one makes room
	require.Equal(t, websocket.ClosePolicyViolation, readClose(t, first))

	other := b.mustDial(t, b.shopper2)
	stopHub(b.hub)
	require.Equal(t, websocket.CloseGoingAway, readClose(t, other))
	_, resp, err := b.dial(t, "token="+b.shopper2, nil)
	refused(t, resp, err, http.StatusServiceUnavailable, "unavailable")
}

func TestWSShutdownClosesSockets(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{})
	var conns []*websocket.Conn
	for i := range 20 {
		tok, _, err := b.tokens.Issue(int64(1000 + i))
		require.NoError(t, err)
		conns = append(conns, b.mustDial(t, tok))
	}
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.open) == 20 }, 5*time.Second, 10*time.Millisecond)

	// Clients that answer the close, as browsers do.
	codes := make(chan int, len(conns))
	for _, c := range conns {
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for {
				if _, _, err := c.ReadMessage(); err != nil {
					var ce *websocket.CloseError
					if ok := asCloseError(err, &ce); ok {
						codes <- ce.Code
					} else {
						codes <- -1
					}
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, b.srv.Shutdown(ctx))
	require.Less(t, time.Since(start), 2*time.Second, "Shutdown must not wait on open sockets")
	for range conns {
		require.Equal(t, websocket.CloseGoingAway, <-codes)
	}
	require.Equal(t, 0.0, metricValue(t, b.srv.ws.m.open))
}

// A client that never answers the close frame costs Shutdown closeGrace,
// not its whole deadline.
func TestWSShutdownWithSilentClient(t *testing.T) {
	t.Parallel()
	b := setupWS(t, notify.HubConfig{})
	b.mustDial(t, b.shopper) // never read: it will not answer the close
	require.Eventually(t, func() bool { return metricValue(t, b.srv.ws.m.open) == 1 }, 5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, b.srv.Shutdown(ctx))
	require.Less(t, time.Since(start), closeGrace+time.Second)
}

func TestProtocolToken(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"":                     "",
		"bearer":               "",
		"bearer, abc.def.ghi":  "abc.def.ghi",
		"bearer,abc":           "abc",
		"chat, bearer, tok":    "tok",
		"Bearer, tok":          "",
		"tok, bearer":          "",
		"bearer, tok, another": "tok",
	} {
		require.Equal(t, want, protocolToken(h), "%q", h)
	}
}

func asCloseError(err error, target **websocket.CloseError) bool {
	return errors.As(err, target)
}

// metricValue reads a counter or a gauge.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	require.NoError(t, m.Write(&d))
	if d.Gauge != nil {
		return d.Gauge.GetValue()
	}
	return d.Counter.GetValue()
}
