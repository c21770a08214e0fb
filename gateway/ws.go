package gateway

// The live feed, GET /api/v1/ws (gateway/openapi.yaml, /api/v1/ws): the
// public voucher frames for everyone (wsvouchers.go), and with a token the
// user's own order frames too. This file holds the options, the route and
// the registry of open sockets; the handshake is in wshandshake.go, one open
// socket in wsconn.go, the metrics in wsmetrics.go.
//
// The handshake is an ordinary Fiber request, so every refusal is the API's
// error body: 403 for a foreign Origin, 401 for a token that is not valid
// (no token at all opens a public socket), 503 when the hub is full or
// stopping, or the snapshot cannot be read. Only then is the connection
// upgraded, and from there on one connection is two goroutines, a reader
// and a writer (wsconn.go).

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/notify"
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
	// (default DefaultMaxPublicSockets; DescriptorCaps sizes it below the
	// open-file limit).
	MaxPublicSockets int
	// SignedInReserve is how many of MaxPublicSockets only sockets with a
	// token may take: sockets without one are 503 past the rest, so they
	// cannot lock shoppers out of their order pushes (default a quarter of
	// MaxPublicSockets; negative: none).
	SignedInReserve int
	// MaxSocketsPerAddr caps the open sockets without a token of one client
	// address (the address the per-address limits use, behind
	// Config.TrustedProxies the forwarded one), and apart from them its
	// signed-in sockets; one more is 429 (default DefaultMaxSocketsPerAddr;
	// negative: no cap).
	MaxSocketsPerAddr int
	// AnonymousMaxAge is how long a socket without a token stays open: then
	// it is closed with 1000 and the page opens a new one, so that sockets
	// nobody watches do not hold their place for ever. Each socket's age is
	// up to a tenth shorter, so that sockets opened together do not all come
	// back in the same second (default DefaultAnonymousMaxAge; negative:
	// no bound).
	AnonymousMaxAge time.Duration
	// MessageRate and MessageBurst bound what one client sends on its
	// socket, every frame alike (pings, text or control, and anything else)
	// but the pongs that answer the server's pings: MessageBurst at once,
	// then MessageRate a second. Each costs a frame to parse, and
	// one socket sending pings as fast as it could was parsed 410,000 times
	// a second; a socket past its budget is closed with 1008. The page
	// sends a ping every 10 s (defaults DefaultSocketMessageRate and DefaultSocketMessageBurst;
	// a negative rate: no bound).
	MessageRate, MessageBurst int
}

// Defaults of Live.
const (
	DefaultSocketPingInterval = 25 * time.Second
	DefaultSocketReadTimeout  = 70 * time.Second
	DefaultSocketWriteTimeout = 10 * time.Second
	DefaultAnonymousMaxAge    = 10 * time.Minute
	DefaultSocketMessageRate  = 2
	DefaultSocketMessageBurst = 10
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
	if l.VoucherQueue <= 0 {
		l.VoucherQueue = DefaultVoucherQueue
	}
	if l.MaxPublicSockets <= 0 {
		l.MaxPublicSockets = DefaultMaxPublicSockets
	}
	switch {
	case l.SignedInReserve == 0:
		l.SignedInReserve = l.MaxPublicSockets / 4
	case l.SignedInReserve < 0:
		l.SignedInReserve = 0
	}
	l.SignedInReserve = min(l.SignedInReserve, l.MaxPublicSockets)
	if l.MaxSocketsPerAddr == 0 {
		l.MaxSocketsPerAddr = DefaultMaxSocketsPerAddr
	}
	if l.AnonymousMaxAge == 0 {
		l.AnonymousMaxAge = DefaultAnonymousMaxAge
	}
	if l.MessageRate == 0 {
		l.MessageRate = DefaultSocketMessageRate
	}
	if l.MessageBurst <= 0 {
		l.MessageBurst = DefaultSocketMessageBurst
	}
	return l
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

// openSockets makes the registry of open sockets behind GET /api/v1/ws
// (routes.go).
func (s *Server) openSockets() error {
	live := s.deps.Live.withDefaults()
	m, err := newWSMetrics(s.deps.Registerer)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ws = &sockets{live: live, m: m, ctx: ctx, cancel: cancel, open: make(map[*websocket.Conn]struct{})}
	s.ws.feed = newVoucherFeed(s, live)
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
