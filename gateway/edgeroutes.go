package gateway

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The operator's switch of the circuit breaker, the one route of the edge
// that is not a gate.

// breakerStatus reports the ops switch and this instance's breaker.
func (s *Server) breakerStatus(c *fiber.Ctx) error {
	if s.deps.Breaker == nil {
		return fmt.Errorf("%w: the breaker is not configured", apperr.ErrUnavailable)
	}
	mode, state := s.deps.Breaker.Status()
	out := api.Breaker{Mode: mode, State: state}
	if p, ok := s.deps.Breaker.(BreakerPaths); ok {
		out.Paths = p.Paths()
	}
	return c.JSON(out)
}

// switchBreaker sets the mode for the whole fleet; every instance obeys
// within a second.
func (s *Server) switchBreaker(c *fiber.Ctx) error {
	if s.deps.Breaker == nil {
		return fmt.Errorf("%w: the breaker is not configured", apperr.ErrUnavailable)
	}
	var in api.BreakerMode
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	if err := s.deps.Breaker.Switch(c.UserContext(), in.Mode); err != nil {
		return err
	}
	return s.breakerStatus(c)
}
