package gateway

import "github.com/gofiber/fiber/v2"

// perAddress is the middleware of every anonymous route (the catalog,
// captcha, registration, login and the WebSocket handshake): Gates.Anonymous
// by client address (clientKey: the IPv4 address, or the IPv6 /56), before
// the route does any work. Loopback gets no exemption: behind a proxy on the
// same host every client would be loopback. Put it first in a route's
// handlers: api.Get("/path", s.perAddress, handler).
func (s *Server) perAddress(c *fiber.Ctx) error {
	if l := s.deps.Gates.Anonymous; l != nil {
		if err := l.Allow(c.UserContext(), s.clientKey(c)); err != nil {
			return err
		}
	}
	return c.Next()
}

// perShopper is the middleware of the signed-in routes other than the buy
// (which has its own gates) and the WebSocket's handshake (which asks
// allowShopper itself, as its token is optional): Gates.Shopper by user,
// then by client address, before the route does any work. Each of these routes costs PostgreSQL or
// Redis work, a lookup of an unknown order id more than one query. Put it
// right after requireShopper.
func (s *Server) perShopper(c *fiber.Ctx) error {
	if err := s.allowShopper(c, userIDOf(c)); err != nil {
		return err
	}
	return c.Next()
}

// allowShopper charges one request of the signed-in shopper uid to
// Gates.Shopper and sets the answer's RateLimit headers. The WebSocket's
// handshake asks it too, once the token has named the shopper: it is the
// one anonymous route whose signed-in form reads PostgreSQL (the snapshot of
// the shopper's orders).
func (s *Server) allowShopper(c *fiber.Ctx, uid int64) error {
	l := s.deps.Gates.Shopper
	if l == nil {
		return nil
	}
	return l.Allow(c.UserContext(), uid, s.clientKey(c), func(k, v string) { c.Set(k, v) })
}
