package gateway

// The buy (POST /api/v1/vouchers/{id}/orders): the request decoded into an
// attempt, run through the pipeline of gateway/buy, and the answer encoded
// and counted. Every step of the buy itself is the pipeline's.

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// HeaderIdempotencyKey names a buy attempt so that retries hold stock once.
const HeaderIdempotencyKey = "Idempotency-Key"

// idempotencyKey validates the header and returns the gateway's own copy
// (the key travels on to Redis and Kafka, long after fasthttp reuses its
// buffer). Visible ASCII only: it is stored and logged.
func idempotencyKey(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	if len(h) > seckill.MaxRequestKey {
		return "", apperr.InvalidField("Idempotency-Key", "the Idempotency-Key header must be at most %d characters", seckill.MaxRequestKey)
	}
	for i := 0; i < len(h); i++ {
		if h[i] < 0x21 || h[i] > 0x7e {
			return "", apperr.InvalidField("Idempotency-Key", "the Idempotency-Key header must be visible ASCII characters without spaces")
		}
	}
	return strings.Clone(h), nil
}

// buy is POST /api/v1/vouchers/{id}/orders: decode, buy, encode.
func (s *Server) buy(c *fiber.Ctx) (err error) {
	vid, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return err
	}
	var a *buy.Attempt
	var p buy.Purchase
	defer func() { s.recordAttempt(a, p.Replayed, err) }()
	key, err := idempotencyKey(c.Get(HeaderIdempotencyKey))
	if err != nil {
		return err
	}
	var in api.BuyRequest
	if err := decodeBuy(c, &in); err != nil {
		return err
	}
	if err := checkNonce(in.ChallengeAnswer); err != nil {
		return err
	}
	qty := int64(1)
	if in.Quantity != nil {
		qty = *in.Quantity
	}
	a = &buy.Attempt{
		Request:         seckill.BuyRequest{VoucherID: vid, UserID: userIDOf(c), Quantity: qty, RequestKey: key},
		ClientKey:       s.clientKey(c),
		CaptchaID:       in.CaptchaID,
		CaptchaAnswer:   in.CaptchaAnswer,
		ChallengeID:     in.ChallengeID,
		ChallengeAnswer: in.ChallengeAnswer,
		Pass:            strings.Clone(c.Get(HeaderSeckillPass)),
	}
	if err := a.Request.Validate(); err != nil {
		return err
	}
	reachedPipeline(c.UserContext())
	p, err = s.pipeline.Buy(c.UserContext(), a)
	for _, h := range a.Headers() {
		c.Response().Header.Add(h.Key, h.Value)
	}
	if err != nil {
		return err
	}
	return writePurchase(c, p.OrderID, p.Status)
}

// recordAttempt counts a buy attempt for the sale report by its answer:
// replayed when it was answered with the order an earlier attempt's
// Idempotency-Key made, so that the report's accepted are the orders made.
// Only attempts the catalog step found a voucher for count: the voucher id
// is the client's, and counting made-up ones would let anyone add rows.
func (s *Server) recordAttempt(a *buy.Attempt, replayed bool, err error) {
	if s.deps.Sales == nil || a == nil || a.Voucher.ID == 0 {
		return
	}
	if err == nil && replayed {
		s.deps.Sales.Replayed(a.Voucher.ID)
		return
	}
	code, limiter := "", ""
	if err != nil {
		code, limiter = internalRow.code, a.Limiter
		if row, ok := lookup(err); ok {
			code = row.code
		}
	}
	s.deps.Sales.Attempt(a.Voucher.ID, code, limiter)
}

// checkNonce refuses a challenge_answer that cannot be a nonce, whatever the
// voucher or the sign-up asks: a malformed answer is the client's mistake
// (400 invalid_input), not a wrong answer.
func checkNonce(answer string) error {
	if !nonceShaped(answer) {
		return apperr.InvalidField("/challenge_answer", "challenge_answer must be the nonce: up to 20 decimal digits")
	}
	return nil
}

// nonceShaped says whether answer may be a proof-of-work nonce: empty (no
// answer) or 1 to 20 decimal digits, the pattern of openapi.yaml.
func nonceShaped(answer string) bool {
	if len(answer) > 20 {
		return false
	}
	for i := 0; i < len(answer); i++ {
		if answer[i] < '0' || answer[i] > '9' {
			return false
		}
	}
	return true
}
