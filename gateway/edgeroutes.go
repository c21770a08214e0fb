package gateway

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The routes of the edge issue that are not gates: the captcha a shopper
// answers before buying a voucher that requires one, and the operator's
// switch of the circuit breaker.

// newCaptcha issues a captcha, single use and short-lived. It is anonymous
// and each one costs an image and a Redis write, so it is behind a per-IP
// limit of its own: one client cannot flood it.
func (s *Server) newCaptcha(c *fiber.Ctx) error {
	if s.deps.Captchas == nil {
		return fmt.Errorf("%w: captchas are not configured", apperr.ErrUnavailable)
	}
	if l := s.deps.Gates.CaptchaIssue; l != nil {
		if err := l.Allow(c.UserContext(), s.clientKey(c)); err != nil {
			return err
		}
	}
	id, image, err := s.deps.Captchas.New(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(api.Captcha{CaptchaID: id, Image: image})
}

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
