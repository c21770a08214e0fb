package gateway

import (
	"context"
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// HeaderIdempotencyKey names a buy attempt so that retries hold stock once.
const HeaderIdempotencyKey = "Idempotency-Key"

// --- accounts

// allowCredentials asks the per-IP limit (Gates.Credentials) of the
// anonymous routes that cost us something: registration, login, captchas.
func (s *Server) allowCredentials(c *fiber.Ctx) error {
	if s.deps.Gates.Credentials == nil {
		return nil
	}
	return s.deps.Gates.Credentials.Allow(c.UserContext(), s.clientKey(c))
}

func (s *Server) register(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	u, err := s.deps.Accounts.Register(c.UserContext(), in.Username, in.Password)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(userOut(u))
}

func (s *Server) login(c *fiber.Ctx) error {
	if err := s.allowCredentials(c); err != nil {
		return err
	}
	var in api.Credentials
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	names := s.deps.Gates.LoginName
	charged := names != nil && in.Username != ""
	if charged {
		if err := names.Take(c.UserContext(), in.Username); err != nil {
			return err
		}
	}
	token, uid, exp, err := s.deps.Accounts.Login(c.UserContext(), in.Username, in.Password)
	if charged && !errors.Is(err, apperr.ErrUnauthenticated) {
		// Only wrong credentials spend the budget: the owner's successes
		// (and our own failures) leave it to the owner.
		names.Refund(context.WithoutCancel(c.UserContext()), in.Username)
	}
	if err != nil {
		return err
	}
	return c.JSON(api.Session{Token: token, UserID: idString(uid), ExpiresAt: exp.UTC()})
}

// --- vouchers (the catalog routes are in catalog.go)

func (s *Server) createVoucher(c *fiber.Ctx) error {
	var in api.NewVoucher
	if err := decodeJSON(c, &in, false); err != nil {
		return err
	}
	v, err := newVoucherIn(in)
	if err != nil {
		return err
	}
	created, err := s.deps.Catalog.Create(c.UserContext(), v)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(voucherJSON(created))
}

func (s *Server) voucherStats(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	st, err := s.deps.Stats.Stats(c.UserContext(), id)
	if err != nil {
		return err
	}
	queue, err := s.queueStats(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(statsOut(id, st, queue))
}

// --- buying

// idempotencyKey validates the header and returns the gateway's own copy
// (the key travels on to Redis and Kafka, long after fasthttp reuses its
// buffer). Visible ASCII only: it is stored and logged.
func idempotencyKey(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	if len(h) > seckill.MaxRequestKey {
		return "", apperr.Invalidf("the Idempotency-Key header must be at most %d characters", seckill.MaxRequestKey)
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x21 || h[i] > 0x7e {
			return "", invalid("the Idempotency-Key header must be visible ASCII characters without spaces")
		}
	}
	return strings.Clone(h), nil
}

// buy is POST /api/v1/vouchers/{id}/orders: decode, buy, encode.
func (s *Server) buy(c *fiber.Ctx) (err error) {
	vid, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return err
	}
	var a *buy.Attempt
	defer func() { s.recordAttempt(a, err) }()
	key, err := idempotencyKey(c.Get(HeaderIdempotencyKey))
	if err != nil {
		return err
	}
	var in api.BuyRequest
	if err := decodeBuy(c, &in); err != nil {
		return err
	}
	qty := int64(1)
	if in.Quantity != nil {
		qty = *in.Quantity
	}
	a = &buy.Attempt{
		Request:       seckill.BuyRequest{VoucherID: vid, UserID: userIDOf(c), Quantity: qty, RequestKey: key},
		ClientKey:     s.clientKey(c),
		CaptchaID:     in.CaptchaID,
		CaptchaAnswer: in.CaptchaAnswer,
		Pass:          strings.Clone(c.Get(HeaderSeckillPass)),
	}
	if err := a.Request.Validate(); err != nil {
		return err
	}
	reachedPipeline(c.UserContext())
	p, err := s.pipeline.Buy(c.UserContext(), a)
	for k, vs := range a.Header() {
		for _, v := range vs {
			c.Response().Header.Add(k, v)
		}
	}
	if err != nil {
		return err
	}
	return writePurchase(c, p.OrderID, p.Status)
}
