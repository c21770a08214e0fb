package gateway

// The captcha (GET /api/v1/captcha) a shopper answers before buying, or
// joining the line of, a voucher that requires one. The buy's captcha step
// judges the answer (gateway/buy).

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

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
