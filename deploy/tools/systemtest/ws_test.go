package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/deploy/tools/apitest"
	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
)

// peer is one more instance of the system on the first one's services:
// the same database, Redis, topic and consumer group, its own HTTP address.
type peer struct {
	*testSystem
	stop func() // shuts it down now (idempotent); also run at cleanup
}

// startPeer runs a second process on ts's configuration, the way a second
// `seckill serve` of the fleet does. mutate may change its configuration
// (roles...) after the address is set.
func (ts *testSystem) startPeer(t *testing.T, mutate func(*app.Config)) *peer {
	t.Helper()
	cfg := ts.cfg
	addr := freeAddr(t)
	cfg.HTTPAddr = addr
	cfg.OpsAddr = freeAddr(t)
	if mutate != nil {
		mutate(&cfg)
	}
	stop := runInstance(t, cfg)
	t.Cleanup(stop)
	p := &peer{testSystem: &testSystem{
		base: "http://" + addr, ops: opsBase(cfg), cfg: cfg, pool: ts.pool, rdb: ts.rdb, tokens: ts.tokens,
		client: apiClient(t, "http://"+addr, 64),
	}, stop: stop}
	p.waitReady(t)
	return p
}

// gatewayOnly makes a peer that only serves HTTP: every order change it
// pushes was made by another process.
func gatewayOnly(c *app.Config) { c.Roles = []string{app.RoleGateway} }

// wsClient is one test socket. A goroutine reads every frame into frames.
type wsClient struct {
	conn   *websocket.Conn
	frames chan wsFrame
	// vouchers are the public voucher frames, kept apart: the order tests
	// read frames as orders. Full, it drops the oldest reader's interest:
	// frames beyond its size are not kept.
	vouchers chan wsFrame
	closed   chan int // the close code, -1 if none
}

type wsFrame struct {
	api.Frame
	raw []byte
	at  time.Time
}

// dialWS opens a socket on ts with the token as a subprotocol, as the page
// does; headers are name, value pairs.
func (ts *testSystem) dialWS(t *testing.T, query string, protocols []string, headers ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	u := "ws" + strings.TrimPrefix(ts.base, "http") + "/api/v1/ws"
	if query != "" {
		u += "?" + query
	}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Subprotocols: protocols}
	conn, resp, err := d.Dial(u, h)
	if conn != nil {
		t.Cleanup(func() { _ = conn.Close() })
	}
	if resp != nil && conn == nil {
		checkRefusedHandshake(t, ts.base+"/api/v1/ws", resp)
	}
	return conn, resp, err
}

// checkRefusedHandshake checks a handshake refused before the upgrade
// against gateway/openapi.yaml, as the tests' HTTP client checks every
// answer, and leaves its body for the caller to read.
func checkRefusedHandshake(t *testing.T, u string, resp *http.Response) {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	if err := apitest.MustLoad(t).Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Errorf("contract: the handshake of GET /api/v1/ws answered %d, which gateway/openapi.yaml does not allow: %v\nbody: %s",
			resp.StatusCode, err, body)
	}
}

// openWS connects token's socket on ts and starts reading it.
func (ts *testSystem) openWS(t *testing.T, token string) *wsClient {
	t.Helper()
	conn, resp, err := ts.dialWS(t, "", []string{"bearer", token})
	require.NoError(t, err)
	require.Equal(t, "bearer", resp.Header.Get("Sec-WebSocket-Protocol"))
	return readWS(t, conn)
}

// readWS starts reading conn's frames, checking each against its schema
// (gateway/wsframes.yaml): a frame off its schema fails t once the socket is
// closed at cleanup (the reader outlives no test, so it reports in time).
func readWS(t *testing.T, conn *websocket.Conn) *wsClient {
	t.Helper()
	spec := apitest.MustLoad(t)
	c := &wsClient{conn: conn, frames: make(chan wsFrame, 4096), vouchers: make(chan wsFrame, 4096), closed: make(chan int, 1)}
	var bad []string
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = conn.Close()
		select {
		case <-done:
			for _, b := range bad {
				t.Errorf("contract: %s", b)
			}
		case <-time.After(10 * time.Second):
			t.Error("the socket's reader did not stop")
		}
	})
	go func() {
		defer close(done)
		defer close(c.frames)
		for {
			_, msg, err := conn.ReadMessage()
			at := time.Now()
			if err == nil {
				if err := spec.CheckFrame(msg); err != nil {
					bad = append(bad, fmt.Sprintf("WebSocket frame %s: %v", msg, err))
				}
			}
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					c.closed <- ce.Code
				} else {
					c.closed <- -1
				}
				return
			}
			f := wsFrame{raw: msg, at: at}
			if json.Unmarshal(msg, &f.Frame) != nil {
				f.Type = "garbage: " + string(msg)
			}
			if f.Type == "voucher" {
				select {
				case c.vouchers <- f:
				default:
				}
				continue
			}
			c.frames <- f
		}
	}()
	return c
}

// next returns the next frame, failing after a while.
func (c *wsClient) next(t *testing.T) wsFrame {
	t.Helper()
	select {
	case f, ok := <-c.frames:
		require.True(t, ok, "the socket closed")
		return f
	case <-time.After(30 * time.Second):
		t.Fatal("no frame within 30s")
	}
	return wsFrame{}
}

// untilPong sends a ping and returns every frame read before the pong:
// the writer answers in order, so those are all the frames pushed so far.
func (c *wsClient) untilPong(t *testing.T) []wsFrame {
	t.Helper()
	require.NoError(t, c.conn.WriteMessage(websocket.TextMessage, []byte(`{"type":"ping"}`)))
	var before []wsFrame
	for {
		f := c.next(t)
		if f.Type == api.FramePong {
			require.JSONEq(t, api.PongFrame, string(f.raw))
			return before
		}
		before = append(before, f)
	}
}

// waitOrder reads frames until orderID has status, and returns that frame.
// Frames of other orders are skipped; a frame of another user fails.
func (c *wsClient) waitOrder(t *testing.T, userID int64, orderID, status string) wsFrame {
	t.Helper()
	for {
		f := c.next(t)
		require.Equal(t, api.FrameOrder, f.Type, "%s", f.raw)
		require.Equal(t, strconv.FormatInt(userID, 10), f.Order.UserID, "a frame of someone else's order: %s", f.raw)
		if f.Order.OrderID == orderID && string(f.Order.Status) == status {
			return f
		}
	}
}

// sameAsREST checks the frame's order is exactly GET /api/v1/orders/{id}.
func (ts *testSystem) sameAsREST(t *testing.T, token string, f wsFrame) {
	t.Helper()
	a := ts.do(t, http.MethodGet, "/api/v1/orders/"+f.Order.OrderID, token, nil, nil)
	require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	require.JSONEq(t, `{"type":"order","order":`+string(a.raw)+`}`, string(f.raw))
}

// refusedWS checks a handshake answered before the upgrade with the API's
// error body.
func refusedWS(t *testing.T, resp *http.Response, err error, status int, code string) {
	t.Helper()
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	require.NotNil(t, resp)
	require.Equal(t, status, resp.StatusCode)
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.Equal(t, code, body.Error.Code)
	require.NotEmpty(t, body.Error.Message)
}

// testUser returns an id no other test uses: every system of the package
// shares one Redis, so one events channel.
func testUser() int64 { return 8_000_000_000 + rand.Int64N(1_000_000_000) }

// TestWSAcrossInstances: a socket on instance B receives the created and
// the paid of an order bought and paid through instance A; another user's
// socket receives none of it; a reconnect gets the snapshot; refusals
// happen before the upgrade.
func TestWSAcrossInstances(t *testing.T) {
	t.Parallel()
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	vid := a.createVoucher(t, 10, 5, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	alice, bob := testUser(), testUser()
	aliceTok, bobTok := a.shopper(t, alice), a.shopper(t, bob)

	aliceWS := b.openWS(t, aliceTok)
	bobWS := b.openWS(t, bobTok)
	bobOnA := a.openWS(t, bobTok)
	require.Empty(t, aliceWS.untilPong(t), "nothing to snapshot yet")

	bought := a.buy(t, vid, aliceTok, 1, "ws-1")
	answered := time.Now()
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	orderID := bought.body["order_id"].(string)
	created := aliceWS.waitOrder(t, alice, orderID, "created")
	t.Logf("created reached the socket on B %v after A answered the buy", created.at.Sub(answered))
	b.sameAsREST(t, aliceTok, created)
	a.sameAsREST(t, aliceTok, created)
	require.NotNil(t, created.Order.PayDeadline)

	paid := a.do(t, http.MethodPost, "/api/v1/orders/"+orderID+"/pay", aliceTok, nil, nil)
	require.Equal(t, http.StatusOK, paid.status, "%s", paid.raw)
	paidFrame := aliceWS.waitOrder(t, alice, orderID, "paid")
	b.sameAsREST(t, aliceTok, paidFrame)

	// Bob's sockets, on both instances, got nothing of alice's.
	require.Empty(t, bobWS.untilPong(t))
	require.Empty(t, bobOnA.untilPong(t))

	// A second order stays created; a reconnect's snapshot has it and not
	// the paid one.
	second := a.buy(t, vid, aliceTok, 2, "ws-2")
	require.Equal(t, http.StatusAccepted, second.status, "%s", second.raw)
	secondID := second.body["order_id"].(string)
	aliceWS.waitOrder(t, alice, secondID, "created")
	require.NoError(t, aliceWS.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")))
	require.Equal(t, websocket.CloseNormalClosure, <-aliceWS.closed)

	for _, inst := range []*testSystem{b.testSystem, a} {
		again := inst.openWS(t, aliceTok)
		snap := again.untilPong(t)
		require.Len(t, snap, 1, "the snapshot is the non-final orders")
		require.Equal(t, secondID, snap[0].Order.OrderID)
		require.EqualValues(t, "created", snap[0].Order.Status)
		require.EqualValues(t, 2, snap[0].Order.Quantity)
		inst.sameAsREST(t, aliceTok, snap[0])
	}

	// Refusals, answered in JSON before any upgrade.
	// (No token at all is a public socket: TestWSPublicVoucherPushAcrossInstances.)
	_, resp, err := b.dialWS(t, "token=not-a-token", nil)
	refusedWS(t, resp, err, http.StatusUnauthorized, "unauthenticated")
	_, resp, err = b.dialWS(t, "", []string{"bearer", aliceTok}, "Origin", "https://evil.example")
	refusedWS(t, resp, err, http.StatusForbidden, "forbidden")
	// The page's own origin is fine, with the token in the query too.
	conn, _, err := b.dialWS(t, "token="+aliceTok, nil, "Origin", b.base)
	require.NoError(t, err)
	require.Len(t, readWS(t, conn).untilPong(t), 1)

	// Stopping B closes its sockets with 1001 ("going away"), promptly.
	start := time.Now()
	b.stop()
	require.Equal(t, websocket.CloseGoingAway, <-bobWS.closed)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Empty(t, bobOnA.untilPong(t), "A's sockets are unaffected")
}

// TestWSPushDelay measures the time from each status change (the event's
// at, stamped after its commit) to the client's read of it, on sockets of
// another instance than the one that changed the orders: a crowd of shoppers
// buys and pays a few hundred orders.
func TestWSPushDelay(t *testing.T) {
	// This test is serial (main_test.go): it judges the p99 of the push delay.
	const shoppers, each = 20, 10
	const n = shoppers * each
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	vid := a.createVoucher(t, n, each, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	type key struct{ id, status string }
	type shopper struct {
		id    int64
		token string
		ws    *wsClient
		got   map[key]time.Time
	}
	crowd := make([]*shopper, shoppers)
	byUser := map[string]*shopper{}
	for i := range crowd {
		s := &shopper{id: testUser(), got: map[key]time.Time{}}
		s.token = a.shopper(t, s.id)
		s.ws = b.openWS(t, s.token)
		require.Empty(t, s.ws.untilPong(t))
		crowd[i] = s
		byUser[strconv.FormatInt(s.id, 10)] = s
	}

	// The status changes as every hub sees them, with their at: on the
	// shard channel of each shopper.
	var mu sync.Mutex
	changed := map[key]time.Time{}
	channels := map[string]bool{}
	for _, s := range crowd {
		channels[notify.ChannelOf(s.id)] = true
	}
	for ch := range channels {
		ps := a.rdb.SSubscribe(t.Context(), ch)
		t.Cleanup(func() { _ = ps.Close() })
		_, err := ps.Receive(t.Context())
		require.NoError(t, err)
		go func() {
			for msg := range ps.Channel() {
				// A message is one event, or an array of a batch's events
				// of the channel (notify.Publisher.PublishBatch).
				type event struct {
					Order api.Order `json:"order"`
					At    time.Time `json:"at"`
				}
				var list []event
				if json.Unmarshal([]byte(msg.Payload), &list) != nil {
					var e event
					if json.Unmarshal([]byte(msg.Payload), &e) != nil {
						continue
					}
					list = []event{e}
				}
				mu.Lock()
				for _, e := range list {
					if byUser[e.Order.UserID] != nil {
						changed[key{e.Order.OrderID, string(e.Order.Status)}] = e.At
					}
				}
				mu.Unlock()
			}
		}()
	}

	// Each shopper buys and then pays its orders one after the other, all
	// shoppers at once.
	orderIDs := make([][]string, shoppers)
	perShopper := func(do func(s *shopper, i int)) {
		var wg sync.WaitGroup
		for si, s := range crowd {
			wg.Go(func() {
				for i := range each {
					do(s, si*each+i)
				}
			})
		}
		wg.Wait()
	}
	collect := func(status string) {
		for _, s := range crowd {
			for len(s.got) < each*(1+btoi(status == "paid")) {
				f := s.ws.next(t)
				require.Equal(t, api.FrameOrder, f.Type, "%s", f.raw)
				require.EqualValues(t, status, f.Order.Status, "%s", f.raw)
				require.Equal(t, strconv.FormatInt(s.id, 10), f.Order.UserID)
				s.got[key{f.Order.OrderID, status}] = f.at
			}
		}
	}
	perShopper(func(s *shopper, i int) {
		r := a.buy(t, vid, s.token, 1, fmt.Sprintf("delay-%d", i))
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.raw)
		mu.Lock()
		orderIDs[i/each] = append(orderIDs[i/each], r.body["order_id"].(string))
		mu.Unlock()
	})
	collect("created")
	perShopper(func(s *shopper, i int) {
		r := a.do(t, http.MethodPost, "/api/v1/orders/"+orderIDs[i/each][i%each]+"/pay", s.token, nil, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	})
	collect("paid")

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(changed) == 2*n
	}, 10*time.Second, 10*time.Millisecond, "the test's own subscriber missed events")
	var delays []time.Duration
	byStatus := map[string][]time.Duration{}
	mu.Lock()
	for _, s := range crowd {
		for k, got := range s.got {
			at, ok := changed[k]
			require.True(t, ok, "%v pushed but never published", k)
			delays = append(delays, got.Sub(at))
			byStatus[k.status] = append(byStatus[k.status], got.Sub(at))
		}
	}
	mu.Unlock()
	require.Len(t, delays, 2*n)
	slices.Sort(delays)
	q := func(d []time.Duration, p float64) time.Duration { return d[int(p*float64(len(d)-1)+0.5)] }
	t.Logf("push delay over %d events of %d shoppers, status change (event at, instance A) to the client's read (sockets on instance B): "+
		"median %v, p90 %v, p99 %v, max %v", len(delays), shoppers, q(delays, .5), q(delays, .9), q(delays, .99), delays[len(delays)-1])
	// The worker stamps one at per batch and then publishes the batch's
	// events, so created carries that wait too.
	for _, st := range []string{"created", "paid"} {
		d := byStatus[st]
		slices.Sort(d)
		t.Logf("  %-7s median %v, p99 %v", st, q(d, .5), q(d, .99))
	}
	require.Greater(t, delays[0], time.Duration(0), "a change is read after it is made")
	require.Less(t, q(delays, .99), time.Second, "p99 of the push delay")

	fams := b.scrape(t)
	require.EqualValues(t, 2*n, counter(t, fams, "seckill_ws_messages_total", "kind", "push"))
	require.EqualValues(t, 2*n, histogram(t, fams, "seckill_ws_push_delay_seconds").GetSampleCount())
	require.EqualValues(t, shoppers, metric(t, fams, "seckill_ws_connections").GetGauge().GetValue())
	require.EqualValues(t, 0, counter(t, fams, "seckill_ws_dropped_total", "reason", "slow"))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWSSlowClientDropped: a client that stops reading while its orders
// change is dropped by the hub (1013, "try again later") once the kernel's
// buffers and the hub's are full, and gets everything written before the
// close; a healthy client of the same instance keeps receiving.
func TestWSSlowClientDropped(t *testing.T) {
	t.Parallel()
	a := startSystem(t, map[string]string{"SECKILL_ROLES": "gateway"})
	slowUser, okUser := testUser(), testUser()

	// A small receive window, so the server's writes block sooner.
	var tcp *net.TCPConn
	d := websocket.Dialer{
		HandshakeTimeout: 10 * time.Second,
		Subprotocols:     []string{"bearer", a.shopper(t, slowUser)},
		NetDial: func(network, addr string) (net.Conn, error) {
			c, err := net.Dial(network, addr)
			if err == nil {
				tcp = c.(*net.TCPConn)
				_ = tcp.SetReadBuffer(16 << 10)
			}
			return c, err
		},
	}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(a.base, "http")+"/api/v1/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	healthy := a.openWS(t, a.shopper(t, okUser))
	require.Empty(t, healthy.untilPong(t))

	pub := notify.NewPublisher(a.rdb)
	order := func(user, id int64) orders.Order {
		now := time.Now()
		return orders.Order{ID: id, VoucherID: 1, UserID: user, Quantity: 1, AmountCents: 100,
			Status: orders.StatusCreated, CreatedAt: now, PayDeadline: now.Add(time.Minute)}
	}
	// Publish until the hub gives up on the client: how much the kernel
	// buffers first depends on its autotuning.
	published := 0
	dropped := func() bool {
		return counter(t, a.scrape(t), "seckill_ws_dropped_total", "reason", "slow") > 0
	}
	for published < 200_000 && !dropped() {
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < 2000; i += 8 {
					ev := orders.Event{Order: order(slowUser, int64(published+i+1)), At: time.Now()}
					require.NoError(t, pub.Publish(context.Background(), ev))
				}
			})
		}
		wg.Wait()
		published += 2000
	}
	require.True(t, dropped(), "still not dropped after %d events", published)
	require.NoError(t, pub.Publish(context.Background(), orders.Event{Order: order(okUser, 1), At: time.Now()}))
	require.Equal(t, "1", healthy.waitOrder(t, okUser, "1", "created").Order.OrderID)

	// Read at full speed now: every frame written before the drop, then
	// the close.
	_ = tcp.SetReadBuffer(1 << 20)
	slow := readWS(t, conn)
	got := 0
	for range slow.frames {
		got++
	}
	code := <-slow.closed
	t.Logf("the slow client read %d of %d frames, then close %d", got, published, code)
	require.Equal(t, websocket.CloseTryAgainLater, code)
	require.Less(t, got, published)
	require.Empty(t, healthy.untilPong(t), "the healthy client is still connected")
}

// TestWSResyncAfterRedisBlip: when the hub loses its Redis subscription,
// changes published in the gap are lost, so every open socket is sent the
// snapshot again, without the client reconnecting.
func TestWSResyncAfterRedisBlip(t *testing.T) {
	t.Parallel()
	a := startSystem(t, nil)
	vid := a.createVoucher(t, 5, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	user := testUser()
	tok := a.shopper(t, user)
	bought := a.buy(t, vid, tok, 1, "")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	id := bought.body["order_id"].(string)
	a.waitStatus(t, tok, id, "created")

	ws := a.openWS(t, tok)
	snap := ws.untilPong(t)
	require.Len(t, snap, 1)
	require.Equal(t, id, snap[0].Order.OrderID)

	// Cut every pub/sub connection of the test Redis: the hub's among them.
	require.NoError(t, a.rdb.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err())
	again := ws.next(t)
	require.Equal(t, id, again.Order.OrderID, "the snapshot is sent again: %s", again.raw)
	require.EqualValues(t, "created", again.Order.Status)
	require.Empty(t, ws.untilPong(t), "the same socket, still open")

	// And the hub is subscribed again: the next change is pushed.
	paid := a.do(t, http.MethodPost, "/api/v1/orders/"+id+"/pay", tok, nil, nil)
	require.Equal(t, http.StatusOK, paid.status, "%s", paid.raw)
	ws.waitOrder(t, user, id, "paid")
}

// nextVoucher returns the next public voucher frame of voucherID for which
// ok holds, skipping the others, failing after a while.
func (c *wsClient) nextVoucher(t *testing.T, voucherID string, ok func(v map[string]any) bool) (map[string]any, time.Time) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case f := <-c.vouchers:
			var m struct {
				Voucher map[string]any `json:"voucher"`
			}
			require.NoError(t, json.Unmarshal(f.raw, &m), "%s", f.raw)
			if m.Voucher["id"] == voucherID && ok(m.Voucher) {
				return m.Voucher, f.at
			}
		case <-deadline:
			t.Fatalf("no voucher frame of %s as expected within 10s", voucherID)
		}
	}
}

// TestWSPublicVoucherPushAcrossInstances: a socket opened without a token on
// instance B sees a voucher created on A, its sell-out through A, and an
// operator's pause on A, all pushed; B's buying path obeys the pause within
// a second.
func TestWSPublicVoucherPushAcrossInstances(t *testing.T) {
	// This test is serial (main_test.go): B must obey the pause within two seconds.
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	conn, resp, err := b.dialWS(t, "", nil)
	require.NoError(t, err, "a visitor without a token may open the socket")
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	visitor := readWS(t, conn)

	vid := a.createVoucher(t, 3, 3, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	visitor.nextVoucher(t, vid, func(v map[string]any) bool { return v["state"] == "on_sale" && v["stock_left"] == 3.0 })

	tok := a.shopper(t, testUser())
	bought := a.buy(t, vid, tok, 3, "")
	answered := time.Now()
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	_, at := visitor.nextVoucher(t, vid, func(v map[string]any) bool { return v["state"] == "sold_out" && v["stock_left"] == 0.0 })
	t.Logf("sell-out on A reached a public socket on B %v after A answered the buy", at.Sub(answered))
	require.Empty(t, visitor.frames, "a public socket gets no order frames")

	other := a.createVoucher(t, 5, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	paused := a.do(t, http.MethodPut, "/api/v1/admin/vouchers/"+other+"/state", a.cfg.AdminToken, map[string]any{"state": "paused"}, nil)
	require.Equal(t, http.StatusOK, paused.status, "%s", paused.raw)
	pausedAt := time.Now()
	visitor.nextVoucher(t, other, func(v map[string]any) bool { return v["state"] == "paused" })
	refused := b.buy(t, other, tok, 1, "")
	require.Equal(t, http.StatusServiceUnavailable, refused.status, "%s", refused.raw)
	require.Contains(t, string(refused.raw), `"sale_paused"`)
	require.Less(t, time.Since(pausedAt), 2*time.Second, "B obeyed the pause at once")
	resumed := a.do(t, http.MethodPut, "/api/v1/admin/vouchers/"+other+"/state", a.cfg.AdminToken, map[string]any{"state": "on_sale"}, nil)
	require.Equal(t, http.StatusOK, resumed.status, "%s", resumed.raw)
	visitor.nextVoucher(t, other, func(v map[string]any) bool { return v["state"] == "on_sale" })
	require.Eventually(t, func() bool { return b.buy(t, other, tok, 1, "").status == http.StatusAccepted }, 2*time.Second, 50*time.Millisecond)
}

// TestWSFloodedSocketIsClosed: every message a client sends costs the
// gateway a frame to parse, and nothing bounded them: one socket sending
// pings as fast as it could was parsed 410,000 times a second. Each socket
// has a budget now (SECKILL_WS_MSG_RATE a second, SECKILL_WS_MSG_BURST at
// once): one that sends far past it, pings in text or control frames or
// pongs nobody asked for, is closed with 1008 (policy violation), while one that sends its burst at
// once, then pings at the budget's pace, waiting for each answer as a page
// does, stays open. The pace is the client's own pauses, never a measured
// speed: a busy machine only makes them longer.
func TestWSFloodedSocketIsClosed(t *testing.T) {
	t.Parallel()
	// The burst is that of the pongs a socket's writer may owe (4), so each
	// ping of it gets its own pong and the calm client knows when the
	// server has read them all.
	const rate, burst, flood = 4, 4, 200
	ts := startSystem(t, map[string]string{
		"SECKILL_WS_MSG_RATE": strconv.Itoa(rate), "SECKILL_WS_MSG_BURST": strconv.Itoa(burst),
		"SECKILL_ROLES": "gateway",
	})
	ping := []byte(`{"type":"ping"}`)

	calm := ts.openWS(t, ts.shopper(t, testUser()))
	for range burst {
		require.NoError(t, calm.conn.WriteMessage(websocket.TextMessage, ping))
	}
	for range burst {
		require.Equal(t, api.FramePong, calm.next(t).Type, "each ping of the burst is answered")
	}
	for range 2 * burst {
		time.Sleep(time.Second/rate + 50*time.Millisecond)
		require.Empty(t, calm.untilPong(t))
	}

	// send writes flood messages until the first write fails: the server
	// may close the socket before the last is sent.
	send := func(write func() error) (sent int) {
		for sent < flood && write() == nil {
			sent++
		}
		return sent
	}
	text := readWS(t, mustDialWS(t, ts))
	sentText := send(func() error { return text.conn.WriteMessage(websocket.TextMessage, ping) })
	control := readWS(t, mustDialWS(t, ts))
	sentControl := send(func() error {
		return control.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second))
	})
	pongFlood := readWS(t, mustDialWS(t, ts))
	sentPongs := send(func() error {
		return pongFlood.conn.WriteControl(websocket.PongMessage, nil, time.Now().Add(10*time.Second))
	})
	for name, c := range map[string]*wsClient{"text pings": text, "control pings": control, "unasked pongs": pongFlood} {
		pongs := 0
		// A bound on a failure, not a measured speed: the close comes
		// within moments of the flood.
		giveUp := time.After(time.Minute)
	read:
		for {
			select {
			case f, ok := <-c.frames:
				if !ok {
					break read
				}
				require.Equal(t, api.FramePong, f.Type, "%s: %s", name, f.raw)
				pongs++
			case <-giveUp:
				t.Fatalf("%s: still open a minute after %d pings, %d answered", name, flood, pongs)
			}
		}
		require.Equal(t, websocket.ClosePolicyViolation, <-c.closed, "%s: a flooding socket is closed with 1008", name)
		require.Less(t, pongs, flood, "%s: the flood is not all answered", name)
		t.Logf("%s: %d pongs before the close", name, pongs)
	}
	t.Logf("the flooders sent %d text pings, %d control pings and %d pongs before the server closed them",
		sentText, sentControl, sentPongs)
	require.EqualValues(t, 3, counter(t, ts.scrape(t), "seckill_ws_dropped_total", "reason", "flood"))

	// The calm socket, at its pace again, was never touched.
	time.Sleep(time.Second/rate + 50*time.Millisecond)
	require.Empty(t, calm.untilPong(t), "the calm socket is still open")
	select {
	case code := <-calm.closed:
		t.Fatalf("the calm socket was closed with %d", code)
	default:
	}
}

// mustDialWS opens a socket without a token on ts.
func mustDialWS(t *testing.T, ts *testSystem) *websocket.Conn {
	t.Helper()
	conn, resp, err := ts.dialWS(t, "", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return conn
}

// TestWSSignedInHandshakeMeetsTheShopperBudget: with a token, the handshake
// reads the shopper's orders from PostgreSQL for its snapshot, so it spends
// the budget of the other signed-in routes (SECKILL_SHOPPER_RATE and
// _BURST), one budget for all of them: past it the handshake is 429 with
// Retry-After, before the upgrade and as the contract says, and the
// shopper's REST routes are refused too; a socket without a token and
// another shopper's are not charged.
func TestWSSignedInHandshakeMeetsTheShopperBudget(t *testing.T) {
	t.Parallel()
	const burst = 3
	ts := startSystem(t, map[string]string{"SECKILL_SHOPPER_RATE": "1", "SECKILL_SHOPPER_BURST": strconv.Itoa(burst),
		"SECKILL_ROLES": "gateway"})
	token := ts.shopper(t, testUser())
	opened := 0
	var resp *http.Response
	var err error
	for range 2 * burst {
		var conn *websocket.Conn
		conn, resp, err = ts.dialWS(t, "", []string{"bearer", token})
		if conn == nil {
			break
		}
		require.Equal(t, "1", resp.Header.Get("RateLimit-Limit"), "the 101 carries the shopper's budget")
		require.NoError(t, conn.Close())
		opened++
	}
	require.Less(t, opened, 2*burst, "the handshakes past the burst are refused")
	require.Equal(t, "1", resp.Header.Get("RateLimit-Limit"))
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	refusedWS(t, resp, err, http.StatusTooManyRequests, "rate_limited")
	a := ts.do(t, http.MethodGet, "/api/v1/orders", token, nil, nil)
	require.Equal(t, http.StatusTooManyRequests, a.status, "one budget for the sockets and the REST routes: %s", a.raw)

	mustDialWS(t, ts)
	readWS(t, func() *websocket.Conn {
		conn, _, err := ts.dialWS(t, "", []string{"bearer", ts.shopper(t, testUser())})
		require.NoError(t, err, "another shopper has a budget of their own")
		return conn
	}()).untilPong(t)
}
