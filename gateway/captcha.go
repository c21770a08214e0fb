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
	// An absent kind is an image; a kind given empty is no kind at all.
	kind := "image"
	if args := c.Context().QueryArgs(); args.Has("kind") {
		kind = string(args.Peek("kind"))
	}
	switch kind {
	case "image":
	case "audio":
		// The same captcha, spoken, for shoppers who cannot read the
		// image; answered and judged like it.
		audio, ok := s.deps.Captchas.(AudioCaptchas)
		if !ok {
			return fmt.Errorf("%w: audio captchas are not configured", apperr.ErrUnavailable)
		}
		id, sound, err := audio.NewAudio(c.UserContext())
		if err != nil {
			return err
		}
		return c.JSON(api.Captcha{CaptchaID: id, Audio: sound})
	default:
		return apperr.InvalidField("kind", "kind must be image or audio")
	}
	id, image, err := s.deps.Captchas.New(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(api.Captcha{CaptchaID: id, Image: image})
}

// newChallenge issues a proof-of-work challenge for a voucher whose
// challenge is pow (the README's "Challenges"). Like a captcha it is
// anonymous and costs Redis writes, so it shares the captchas' per-IP
// budget; its difficulty rises with the address's and the voucher's
// recent asks.
func (s *Server) newChallenge(c *fiber.Ctx) error {
	raw := c.Query("voucher_id")
	if args := c.Context().QueryArgs(); args.Has("purpose") {
		return s.newRegisterChallenge(c, string(args.Peek("purpose")), raw)
	}
	if raw == "" {
		// 409 like both at once: the query is well formed, it names no
		// challenge (openapi.yaml: exactly one of the two).
		return apperr.Public(apperr.ErrConflict, "name the challenge: send voucher_id (to buy or join that voucher) or purpose=register (to sign up)")
	}
	vid, err := parseID(raw, "voucher_id", "voucher_id")
	if err != nil {
		return err
	}
	if s.deps.Challenges == nil {
		return fmt.Errorf("%w: challenges are not configured", apperr.ErrUnavailable)
	}
	v, err := s.deps.Catalog.Voucher(c.UserContext(), vid)
	if err != nil {
		return err
	}
	if !v.ProofOfWork {
		// The request is well formed; the voucher is not sold so (409,
		// like a pay of an order that is not payable).
		return apperr.Publicf(apperr.ErrConflict, "voucher %d takes no proof of work (its challenge is %s): buy it without one", vid, v.Challenge())
	}
	if l := s.deps.Gates.CaptchaIssue; l != nil {
		if err := l.Allow(c.UserContext(), s.clientKey(c)); err != nil {
			return err
		}
	}
	ch, err := s.deps.Challenges.Issue(c.UserContext(), vid, s.clientKey(c))
	if err != nil {
		return err
	}
	return c.JSON(ch)
}

// newRegisterChallenge is GET /api/v1/challenges?purpose=register: a proof
// of work for POST /api/v1/users when SECKILL_REGISTER_CHALLENGE is pow,
// behind the same per-IP budget as the vouchers' challenges.
func (s *Server) newRegisterChallenge(c *fiber.Ctx, purpose, voucherID string) error {
	switch {
	case purpose != "register":
		return apperr.InvalidField("purpose", "purpose must be register (or absent, with voucher_id)")
	case voucherID != "":
		// 409, not 400: each parameter alone is valid (openapi.yaml), the
		// two together ask for two different challenges.
		return apperr.Public(apperr.ErrConflict, "a registration's challenge names no voucher: send purpose or voucher_id, not both")
	case s.deps.Challenges == nil:
		return fmt.Errorf("%w: challenges are not configured", apperr.ErrUnavailable)
	case s.cfg.RegisterChallenge != RegisterPoW:
		return apperr.Publicf(apperr.ErrConflict, "registering takes no proof of work here (it takes %s): register without one", s.registerTakes())
	}
	if l := s.deps.Gates.CaptchaIssue; l != nil {
		if err := l.Allow(c.UserContext(), s.clientKey(c)); err != nil {
			return err
		}
	}
	ch, err := s.deps.Challenges.IssueRegister(c.UserContext(), s.clientKey(c))
	if err != nil {
		return err
	}
	return c.JSON(ch)
}

// registerTakes names what registering takes, for messages.
func (s *Server) registerTakes() string {
	if s.cfg.RegisterChallenge == "" {
		return RegisterCaptcha
	}
	return s.cfg.RegisterChallenge
}
