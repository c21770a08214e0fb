package gateway

// The live feed, GET /api/v1/ws (gateway/openapi.yaml, /api/v1/ws): the
// public voucher frames for everyone (wsvouchers.go), and with a token the
// user's own order frames too.
//
// The handshake is an ordinary Fiber request, so every refusal is the API's
// error body: 403 for a foreign Origin, 401 for a token that is not valid
// (no token at all opens a public socket), 503 when
// the hub is full or stopping, or the snapshot cannot be read. Only then is
// the connection upgraded, and from there on one connection is two
// goroutines: the handler's, which only reads (client pings, pongs, the
// close), and one writer, which alone writes (snapshot, pushed changes, pongs,
// heartbeats, the close frame). The reader hands the writer what it must
// answer through channels; the handler returns only after the writer has,
// because contrib/websocket pools the connection as soon as it does.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fasthttpws "github.com/fasthttp/websocket"
	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// LiveFeed is the stream of the fleet's order changes, per user
// (*notify.Hub implements it).
type LiveFeed interface {
	// Subscribe opens userID's feed. When it cannot (hub full, stopped),
	// the subscription it returns has already ended and Err says why.
	Subscribe(userID int64) *notify.Subscription
}

// Live wires GET /api/v1/ws. Without a Feed the route answers 503. Its
// metrics (seckill_ws_*) go to Deps.Registerer.
type Live struct {
	// Feed pushes every status change of the user's orders.
	Feed LiveFeed
	// PingInterval is how often the server pings an idle client, so that
	// proxies keep the connection and a dead peer is found (default 25s).
	PingInterval time.Duration
	// ReadTimeout is how long a client may stay silent, pongs included,
	// before the socket counts as dead (default 70s: almost three pings).
	ReadTimeout time.Duration
	// WriteTimeout bounds each write; a client that does not take a frame
	// in that time is dropped (default 10s).
	WriteTimeout time.Duration
	// VoucherQueue bounds the voucher frames waiting for one socket; a
	// socket that lets it fill is resynced (default DefaultVoucherQueue).
	VoucherQueue int
	// MaxPublicSockets caps this instance's sockets; one more is 503
	// (default DefaultMaxPublicSockets).
	MaxPublicSockets int
}

// Defaults of Live.
const (
	DefaultSocketPingInterval = 25 * time.Second
	DefaultSocketReadTimeout  = 70 * time.Second
	DefaultSocketWriteTimeout = 10 * time.Second
)

const (
	// bearerProtocol is the subprotocol that carries the token for browsers,
	// which cannot set headers on a WebSocket: `bearer, <token>`. The server
	// echoes it, or browsers drop the connection.
	bearerProtocol = "bearer"
	// closeGrace is how long the server waits for the client's answer to its
	// close frame, and the deadline of writing that frame.
	closeGrace = time.Second
	// claimTimeout frees a subscription whose upgrade never ran (the 101
	// could not be written): fasthttp does not tell us.
	claimTimeout = 30 * time.Second
	// maxPendingPongs bounds the pongs owed to a client: a ping flood costs
	// the writer at most this many frames at a time.
	maxPendingPongs = 4
	// socketLocal is the Fiber local that hands the session from the
	// handshake to the socket. A string: contrib/websocket copies only those.
	socketLocal = "gateway.socket"
)

// Reasons a socket was dropped, as the seckill_ws_dropped_total label.
const (
	dropSlow         = "slow"          // the hub's buffer filled (close 1013)
	dropReplaced     = "replaced"      // the user opened too many sockets (close 1008)
	dropIdle         = "idle"          // nothing heard within ReadTimeout
	dropWriteFailed  = "write_failed"  // a write failed or missed its deadline
	dropProtocol     = "protocol"      // a message that is not {"type":"ping"}, or too large
	dropResyncFailed = "resync_failed" // the snapshot after a hub resync could not be read (close 1011)
)

// Kinds of frames written, as the seckill_ws_messages_total label.
const (
	msgSnapshot = "snapshot"
	msgPush     = "push"
	msgPong     = "pong"
	msgVoucher  = "voucher" // a voucher's change (wsvouchers.go)
	msgResync   = "resync"  // a voucher frame sent to catch up after a full queue
)

func (l Live) withDefaults() Live {
	if l.PingInterval <= 0 {
		l.PingInterval = DefaultSocketPingInterval
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultSocketReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultSocketWriteTimeout
	}
	return l
}

// wsMetrics are the socket collectors, per Server (two gateways in one test
// never collide), registered on Deps.Registerer.
type wsMetrics struct {
	open     prometheus.Gauge
	messages *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	delay    prometheus.Histogram
	// Resolved once: the writer counts every frame.
	snapshots, pushes, pongs, vouchers, resyncs prometheus.Counter
}

func newWSMetrics(reg prometheus.Registerer) (*wsMetrics, error) {
	m := &wsMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_ws_connections",
			Help: "Open WebSockets of GET /api/v1/ws.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ws_messages_total",
			Help: "Frames written to sockets, by kind: snapshot (on connect or resync), push (an order's status change), voucher (a voucher's change), resync (voucher frames after a full queue), pong.",
		}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ws_dropped_total",
			Help: "Sockets the server closed on a client: slow (hub buffer full), replaced, idle, write_failed, protocol, resync_failed.",
		}, []string{"reason"}),
		// The frames carry no timestamp of the change, so this is the socket's
		// share of the delay; seckill_notify_push_delay_seconds is the share
		// before it (status change to the hub's hand-off).
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_ws_push_delay_seconds",
			Help: "Time from the hub handing a status change to the socket's writer to the end of its write " +
				"(the change to the hand-off is seckill_notify_push_delay_seconds).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	m.snapshots = m.messages.WithLabelValues(msgSnapshot)
	m.pushes = m.messages.WithLabelValues(msgPush)
	m.pongs = m.messages.WithLabelValues(msgPong)
	m.vouchers = m.messages.WithLabelValues(msgVoucher)
	m.resyncs = m.messages.WithLabelValues(msgResync)
	for _, r := range []string{dropSlow, dropReplaced, dropIdle, dropWriteFailed, dropProtocol, dropResyncFailed} {
		m.dropped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.open, m.messages, m.dropped, m.delay} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway: register WebSocket metrics: %w", err)
	}
	return m, nil
}

// sockets is the gateway's registry of open WebSockets. fasthttp forgets a
// connection once it is hijacked, so its Shutdown neither waits for nor
// closes them: this does.
type sockets struct {
	live    Live
	m       *wsMetrics
	feed    *voucherFeed
	upgrade fiber.Handler
	// ctx ends at Shutdown: every writer then closes its socket with 1001.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closing bool
	open    map[*websocket.Conn]struct{}
	wg      sync.WaitGroup
}

// mountWebSocket registers GET /ws on r (the /api/v1 group).
func (s *Server) mountWebSocket(r fiber.Router) error {
	live := s.deps.Live.withDefaults()
	m, err := newWSMetrics(s.deps.Registerer)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ws = &sockets{live: live, m: m, ctx: ctx, cancel: cancel, open: make(map[*websocket.Conn]struct{})}
	s.ws.feed = newVoucherFeed(s, live.VoucherQueue, live.MaxPublicSockets)
	s.ws.upgrade = websocket.New(s.serveSocket, websocket.Config{
		Subprotocols: []string{bearerProtocol},
		// Origin is checked before, with a 403 the page can read.
		Origins: []string{"*"},
		// The default writes the panic's text on the socket; the reader and
		// the writer recover their own, this catches the rest.
		RecoverHandler: func(*websocket.Conn) {
			if r := recover(); r != nil {
				s.log.Error("panic in WebSocket handler", "panic", r, "stack", string(debug.Stack()))
			}
		},
	})
	r.Get("/ws", s.perAddress, s.openSocket)
	return nil
}

// session is what the handshake hands the socket: the subscriptions (opened
// before the snapshot was read, so no change falls between the two) and
// the snapshot's frames. sub is nil on a public socket (no token). It has no Close method on purpose: fasthttp closes
// io.Closer locals when the request ends, which for an upgrade is when the
// socket ends.
type session struct {
	userID    int64
	requestID string
	sub       *notify.Subscription
	pub       *publicSub
	snapshot  [][]byte
	claimed   atomic.Bool
	timer     *time.Timer
}

// release ends the session's subscriptions.
func (w *sockets) release(ss *session) {
	if ss.sub != nil {
		ss.sub.Close()
	}
	w.feed.unsubscribe(ss.pub)
}

// claim gives the session to exactly one owner: the socket, or the timer
// that frees it when the upgrade never happened.
func (ss *session) claim() bool { return ss.claimed.CompareAndSwap(false, true) }

// openSocket is the handshake: every check that can be answered in HTTP is
// answered here, before the upgrade.
func (s *Server) openSocket(c *fiber.Ctx) error {
	if s.deps.Live.Feed == nil {
		return seckill.Public(seckill.ErrUnavailable, "live order updates are not available on this server")
	}
	if !websocket.IsWebSocketUpgrade(c) {
		return invalid("this address speaks WebSocket only: open it with new WebSocket(...)")
	}
	if !s.originAllowed(c) {
		return seckill.Public(seckill.ErrForbidden, "pages of this origin may not open the order feed")
	}
	uid, err := s.socketUser(c)
	if err != nil {
		return err
	}
	if uid > 0 {
		c.Locals(userIDKey{}, uid)
	}

	s.ws.mu.Lock()
	closing := s.ws.closing
	s.ws.mu.Unlock()
	if closing {
		return seckill.Public(seckill.ErrUnavailable, "this server is shutting down; connect again")
	}
	ss := &session{userID: uid, requestID: requestIDOf(c)}
	if uid > 0 {
		ss.sub = s.deps.Live.Feed.Subscribe(uid)
		if err := ss.sub.Err(); err != nil {
			ss.sub.Close()
			return err // ErrHubFull, ErrStopped: 503
		}
	}
	if ss.pub = s.ws.feed.subscribe(s.ws.ctx); ss.pub == nil {
		s.ws.release(ss)
		return seckill.Public(seckill.ErrUnavailable, "this server has too many live connections; try again shortly")
	}
	ss.snapshot = s.ws.feed.current(c.UserContext())
	if uid > 0 {
		orders, err := s.socketSnapshot(c.UserContext(), uid)
		if err != nil {
			s.ws.release(ss)
			return err
		}
		ss.snapshot = append(ss.snapshot, orders...)
	}
	ss.timer = time.AfterFunc(claimTimeout, func() {
		if ss.claim() {
			s.ws.release(ss)
		}
	})
	c.Locals(socketLocal, ss)
	if err := s.ws.upgrade(c); err != nil {
		if ss.claim() {
			ss.timer.Stop()
			s.ws.release(ss)
		}
		return invalid("not a valid WebSocket handshake")
	}
	return nil
}

// originAllowed lets through requests without an Origin (not a browser:
// such a client could send any Origin anyway, and its token is what
// authenticates it), the page's own origin, and Config.AllowedOrigins
// ("*" allows any).
func (s *Server) originAllowed(c *fiber.Ctx) bool {
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, string(c.Request().Host()))
}

// socketUser authenticates the handshake: the token comes from the
// subprotocols `bearer, <token>` or from ?token=. Without one the socket is
// public (user 0: voucher frames only); a token that is not valid is 401,
// so a page whose session expired learns it.
func (s *Server) socketUser(c *fiber.Ctx) (int64, error) {
	tok := protocolToken(c.Get(fiber.HeaderSecWebSocketProtocol))
	if tok == "" {
		tok = c.Query("token")
	}
	if tok == "" {
		return 0, nil
	}
	uid, err := s.deps.Tokens.Verify(tok)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %w", seckill.ErrUnauthenticated, err)
	case uid <= 0:
		return 0, fmt.Errorf("%w: token names no user", seckill.ErrUnauthenticated)
	}
	return uid, nil
}

// protocolToken returns the token of a `bearer, <token>` subprotocol list.
func protocolToken(h string) string {
	if h == "" {
		return ""
	}
	parts := strings.Split(h, ",")
	for i := 0; i+1 < len(parts); i++ {
		if strings.TrimSpace(parts[i]) == bearerProtocol {
			return strings.TrimSpace(parts[i+1])
		}
	}
	return ""
}

// socketSnapshot returns the frames of the user's non-final orders, oldest
// first, in the very shape the hub pushes (notify.OrderFrame).
func (s *Server) socketSnapshot(ctx context.Context, uid int64) ([][]byte, error) {
	list, err := s.deps.Orders.List(ctx, uid)
	if err != nil {
		return nil, err
	}
	list = slices.DeleteFunc(list, func(o orders.Order) bool {
		final := o.Status != orders.StatusReserved && o.Status != orders.StatusCreated
		return final || o.UserID != uid // never someone else's, whatever the reader did
	})
	slices.SortStableFunc(list, func(a, b orders.Order) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	frames := make([][]byte, 0, len(list))
	for _, o := range list {
		f, err := notify.OrderFrame(o)
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
	}
	return frames, nil
}

// add registers an open socket; false once Shutdown has begun.
func (w *sockets) add(conn *websocket.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return false
	}
	w.open[conn] = struct{}{}
	// Added under the lock that Shutdown takes before it waits.
	w.wg.Add(1)
	w.m.open.Inc()
	return true
}

func (w *sockets) remove(conn *websocket.Conn) {
	w.mu.Lock()
	delete(w.open, conn)
	w.mu.Unlock()
	w.m.open.Dec()
	w.wg.Done()
}

// closeSockets closes every socket with 1001 and waits for their handlers,
// or for ctx; then it cuts the connections still open.
func (s *Server) closeSockets(ctx context.Context) error {
	if s.ws == nil {
		return nil
	}
	w := s.ws
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.cancel()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	for conn := range w.open {
		cut(conn)
	}
	w.mu.Unlock()
	return fmt.Errorf("gateway: closing WebSockets: %w", ctx.Err())
}

// socketEnd is why a socket ends: the close frame to send (code 0: none)
// and, for a drop, the metric's reason.
type socketEnd struct {
	code   int
	text   string
	reason string
}

// socket is one open connection.
type socket struct {
	srv  *Server
	w    *sockets
	conn *websocket.Conn
	ss   *session
	log  *slog.Logger

	// Reader to writer: what the writer owes the client.
	pongs     chan struct{} // {"type":"pong"} frames
	ctrlPongs chan []byte   // pong control frames, for the client's pings
	// readerGone is closed when the reader stops; readEnd is set before.
	readerGone chan struct{}
	readEnd    socketEnd
	// closing is set once the writer sent its close frame: the reader then
	// only waits for the client's answer.
	closing atomic.Bool
}

// serveSocket runs one upgraded connection. It is the reader; it starts the
// writer and returns only after the writer has finished.
func (s *Server) serveSocket(conn *websocket.Conn) {
	ss, _ := conn.Locals(socketLocal).(*session)
	if ss == nil || !ss.claim() {
		// The timer freed the subscription: the 101 took half a minute.
		_ = conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "handshake too slow; connect again"), time.Now().Add(closeGrace))
		return
	}
	ss.timer.Stop()
	defer s.ws.release(ss)
	k := &socket{
		srv: s, w: s.ws, conn: conn, ss: ss,
		log:        s.log.With("user_id", ss.userID, "request_id", ss.requestID),
		pongs:      make(chan struct{}, maxPendingPongs),
		ctrlPongs:  make(chan []byte, 1),
		readerGone: make(chan struct{}),
	}
	if !s.ws.add(conn) {
		k.writeClose(socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"})
		return
	}
	defer s.ws.remove(conn)
	start := time.Now()

	writerDone := make(chan socketEnd, 1)
	go func() {
		var end socketEnd
		defer func() {
			if r := recover(); r != nil {
				k.log.Error("panic in WebSocket writer", "panic", r, "stack", string(debug.Stack()))
				cut(conn) // wakes the reader
			}
			writerDone <- end
		}()
		end = k.write()
		k.finish(end)
	}()

	var end socketEnd
	func() {
		defer func() {
			if r := recover(); r != nil {
				k.log.Error("panic in WebSocket reader", "panic", r, "stack", string(debug.Stack()))
				end = socketEnd{code: websocket.CloseInternalServerErr, text: "internal error"}
			}
		}()
		end = k.read()
	}()
	k.readEnd = end
	close(k.readerGone)
	wend := <-writerDone

	// The reader's reason is the cause when it has one (a bad message, a
	// silent client): the writer's failure after it is only the consequence,
	// like a ping that could not be written to a socket already closing.
	if end.reason != "" {
		wend.reason = end.reason
	}
	if wend.reason != "" {
		s.ws.m.dropped.WithLabelValues(wend.reason).Inc()
	}
	k.log.Debug("websocket closed", "duration", time.Since(start), "code", wend.code, "drop", wend.reason)
}

// extend pushes the read deadline: the client was heard from.
func (k *socket) extend() {
	_ = k.conn.SetReadDeadline(time.Now().Add(k.w.live.ReadTimeout))
}

// read consumes the client's messages until the connection ends, and says
// which close the writer should send.
func (k *socket) read() socketEnd {
	conn := k.conn
	conn.SetReadLimit(notify.MaxClientMessage)
	k.extend()
	conn.SetPongHandler(func(string) error {
		k.extend()
		return nil
	})
	// The library's default handlers would write from this goroutine.
	conn.SetPingHandler(func(data string) error {
		k.extend()
		select {
		case k.ctrlPongs <- []byte(data):
		default: // one pong answers a burst of pings
		}
		return nil
	})
	peerCode := -1
	conn.SetCloseHandler(func(code int, _ string) error {
		peerCode = code
		return nil
	})
	for {
		typ, msg, err := conn.ReadMessage()
		if err != nil {
			var ne net.Error
			switch {
			case peerCode >= 0:
				// Answer the client's close with its code, as RFC 6455 asks.
				code := peerCode
				if code == websocket.CloseNoStatusReceived {
					code = websocket.CloseNormalClosure
				}
				return socketEnd{code: code}
			case k.closing.Load():
				return socketEnd{} // our close went out; the wait is over
			case errors.Is(err, fasthttpws.ErrReadLimit):
				// contrib/websocket's ErrReadLimit is a copy, never returned.
				// The library already sent 1009.
				return socketEnd{reason: dropProtocol}
			case errors.As(err, &ne) && ne.Timeout():
				return socketEnd{code: websocket.ClosePolicyViolation, text: "nothing heard from the client", reason: dropIdle}
			default:
				return socketEnd{} // the connection is gone
			}
		}
		if k.closing.Load() {
			continue // only the client's close matters now
		}
		k.extend()
		if typ != websocket.TextMessage {
			return socketEnd{code: websocket.CloseUnsupportedData, text: "text frames only", reason: dropProtocol}
		}
		if _, err := notify.ParseClientMessage(msg); err != nil {
			return socketEnd{code: websocket.ClosePolicyViolation, text: `the only message is {"type":"ping"}`, reason: dropProtocol}
		}
		select {
		case k.pongs <- struct{}{}:
		default: // enough pongs are owed already
		}
	}
}

// write is the one writer: the snapshot, then every change, pong and
// heartbeat, until something ends the socket.
func (k *socket) write() socketEnd {
	live := k.w.live
	ping := time.NewTicker(live.PingInterval)
	defer ping.Stop()
	if end, ok := k.sendSnapshot(k.ss.snapshot); !ok {
		return end
	}
	k.ss.snapshot = nil
	sub, pub := k.ss.sub, k.ss.pub
	var orderFrames <-chan []byte
	var orderResync <-chan struct{}
	if sub != nil {
		orderFrames, orderResync = sub.C(), sub.Resync()
	}
	for {
		select {
		case f := <-pub.c:
			if err := k.send(f); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.vouchers.Inc()
		case <-pub.wake:
			if !pub.resync.Swap(false) {
				continue
			}
			for len(pub.c) > 0 {
				<-pub.c // older than what current() sends
			}
			for _, f := range k.w.feed.current(k.w.ctx) {
				if err := k.send(f); err != nil {
					return socketEnd{reason: dropWriteFailed}
				}
				k.w.m.resyncs.Inc()
			}
		case f, ok := <-orderFrames:
			if !ok {
				return hubEnd(sub.Err())
			}
			took := time.Now()
			if err := k.send(f); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.pushes.Inc()
			k.w.m.delay.Observe(time.Since(took).Seconds())
		case <-orderResync:
			// The hub lost Redis for a moment: changes may have been missed.
			ctx, cancel := context.WithTimeout(k.w.ctx, k.srv.cfg.RequestTimeout)
			frames, err := k.srv.socketSnapshot(ctx, k.ss.userID)
			cancel()
			if err != nil {
				if k.w.ctx.Err() != nil {
					return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
				}
				k.log.Warn("websocket resync: cannot read the orders", "err", err)
				return socketEnd{code: websocket.CloseInternalServerErr, text: "please reconnect", reason: dropResyncFailed}
			}
			if end, ok := k.sendSnapshot(frames); !ok {
				return end
			}
		case <-k.pongs:
			if err := k.send([]byte(notify.PongFrame)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
			k.w.m.pongs.Inc()
		case data := <-k.ctrlPongs:
			if err := k.conn.WriteControl(websocket.PongMessage, data, time.Now().Add(live.WriteTimeout)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
		case <-ping.C:
			if err := k.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(live.WriteTimeout)); err != nil {
				return socketEnd{reason: dropWriteFailed}
			}
		case <-k.readerGone:
			return k.readEnd
		case <-k.w.ctx.Done():
			return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
		}
	}
}

func (k *socket) sendSnapshot(frames [][]byte) (socketEnd, bool) {
	for _, f := range frames {
		if err := k.send(f); err != nil {
			return socketEnd{reason: dropWriteFailed}, false
		}
		k.w.m.snapshots.Inc()
	}
	return socketEnd{}, true
}

// send writes one text frame within WriteTimeout.
func (k *socket) send(frame []byte) error {
	if err := k.conn.SetWriteDeadline(time.Now().Add(k.w.live.WriteTimeout)); err != nil {
		return err
	}
	return k.conn.WriteMessage(websocket.TextMessage, frame)
}

// hubEnd maps why the hub ended the subscription to the close frame.
func hubEnd(err error) socketEnd {
	switch {
	case errors.Is(err, notify.ErrSlowConsumer):
		return socketEnd{code: websocket.CloseTryAgainLater, text: "too slow; reconnect for a fresh snapshot", reason: dropSlow}
	case errors.Is(err, notify.ErrReplaced):
		return socketEnd{code: websocket.ClosePolicyViolation, text: "replaced by a newer connection of the same user", reason: dropReplaced}
	default: // notify.ErrStopped: the instance is going away
		return socketEnd{code: websocket.CloseGoingAway, text: "server shutting down"}
	}
}

// finish sends the close frame, if any, and makes sure the reader stops:
// it waits a moment for the client's answering close, then cuts the
// connection.
func (k *socket) finish(end socketEnd) {
	select {
	case <-k.readerGone:
		// The reader ended it: answer the client's close, or say why.
		k.writeClose(end)
		return
	default:
	}
	k.closing.Store(true)
	if end.code != 0 && k.writeClose(end) == nil {
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-k.readerGone:
			return
		case <-t.C:
		}
	}
	cut(k.conn)
}

// cut ends the TCP connection under a socket, which wakes its reader.
// contrib/websocket's connection is fasthttp's hijacked one, whose Close does
// nothing (fasthttp closes it once the handler returns): close what is under.
func cut(conn *websocket.Conn) {
	nc := conn.NetConn()
	if u, ok := nc.(interface{ UnsafeConn() net.Conn }); ok {
		nc = u.UnsafeConn()
	}
	_ = nc.Close()
}

func (k *socket) writeClose(end socketEnd) error {
	if end.code == 0 {
		return nil
	}
	return k.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(end.code, end.text), time.Now().Add(closeGrace))
}
