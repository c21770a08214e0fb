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
// (which has its own gates): Gates.Shopper by user, then by client address,
// before the route does any work. Each of these routes costs PostgreSQL or
// Redis work, a lookup of an unknown order id more than one query. Put it
// right after requireShopper.
func (s *Server) perShopper(c *fiber.Ctx) error {
	if l := s.deps.Gates.Shopper; l != nil {
		if err := l.Allow(c.UserContext(), userIDOf(c), s.clientKey(c), func(k, v string) { c.Set(k, v) }); err != nil {
			return err
		}
	}
	return c.Next()
}
