package gateway

// The handshake of GET /api/v1/ws: every check that can be answered in HTTP
// (Origin, token, hub capacity, the snapshot) before the upgrade; the open
// socket is in wsconn.go.

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

// openSocket is the handshake: every check that can be answered in HTTP is
// answered here, before the upgrade.
func (s *Server) openSocket(c *fiber.Ctx) error {
	if s.deps.Live.Feed == nil {
		return apperr.Public(apperr.ErrUnavailable, "live order updates are not available on this server")
	}
	if !websocket.IsWebSocketUpgrade(c) {
		return invalid("this address speaks WebSocket only: open it with new WebSocket(...)")
	}
	if !s.originAllowed(c) {
		return apperr.Public(apperr.ErrForbidden, "pages of this origin may not open the order feed")
	}
	uid, err := s.socketUser(c)
	if err != nil {
		return err
	}
	if uid > 0 {
		c.Locals(userIDKey{}, uid)
		// The shopper's budget of the other signed-in routes, before the
		// snapshot reads their orders from PostgreSQL: the per-address
		// limit in front of every handshake (SECKILL_IP_RATE) lets one
		// account, from one address, read them 50 times a second.
		if err := s.allowShopper(c, uid); err != nil {
			return err
		}
	}

	s.ws.mu.Lock()
	closing := s.ws.closing
	s.ws.mu.Unlock()
	if closing {
		return apperr.Public(apperr.ErrUnavailable, "this server is shutting down; connect again")
	}
	ss := &session{userID: uid, requestID: requestIDOf(c)}
	// The socket caps first: a socket refused here must not have replaced
	// the user's older one in the hub.
	if ss.pub, err = s.ws.feed.subscribe(s.ws.ctx, s.clientKey(c), uid > 0); err != nil {
		return err // 503 full, 429 too many of this address
	}
	if uid > 0 {
		ss.sub = s.deps.Live.Feed.Subscribe(uid)
		if err := ss.sub.Err(); err != nil {
			s.ws.release(ss)
			return err // ErrHubFull, ErrStopped: 503
		}
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
		return 0, fmt.Errorf("%w: %w", apperr.ErrUnauthenticated, err)
	case uid <= 0:
		return 0, fmt.Errorf("%w: token names no user", apperr.ErrUnauthenticated)
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
