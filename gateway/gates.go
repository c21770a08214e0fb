package gateway

import (
	"context"
	"net/http"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// The buying route runs this chain (the README, "The purchase
// path"); auth and the decoding of the request come first, in the
// handler, and cost no I/O:
//
//	GlobalLimit → UserLimit → voucher → Captcha → Breaker → SoldOut → buy
//
// Each named step of Gates is optional (nil lets every attempt pass), so the
// gates of the edge issue drop in without reshaping the handler. "voucher" is
// the gateway's own step: it loads the voucher's recent copy into
// Attempt.Voucher (404 for an unknown voucher) so that the captcha gate can
// read captcha_required and the last step can choose the buyer by kind. "buy"
// is Deps.SyncBuyer for limit and common vouchers when it is set, and
// Deps.Buyer otherwise.

// Attempt is one shopper's buy request as it travels through the gates. Every
// string in it is the gateway's own copy, safe to keep after the request.
type Attempt struct {
	// Request is what the buyer gets: voucher, user (from the token),
	// quantity and Idempotency-Key, already validated.
	Request seckill.BuyRequest
	// CaptchaID and CaptchaAnswer are as the shopper sent them (possibly
	// empty); the captcha gate judges them.
	CaptchaID     string
	CaptchaAnswer string
	// Voucher is a recent copy of the voucher (Catalog.Cached). It is zero
	// for the gates before the voucher step (the two rate limits). Its
	// StockLeft is not live: the reservation is the only judge of stock.
	Voucher seckill.Voucher

	header http.Header
}

// SetHeader adds a header to the answer, whatever it turns out to be: a rate
// limiter's RateLimit-* headers on a 202 as on a 429.
func (a *Attempt) SetHeader(key, value string) {
	if a.header == nil {
		a.header = make(http.Header, 4)
	}
	a.header.Set(key, value)
}

// Header returns the headers set so far (nil when none).
func (a *Attempt) Header() http.Header { return a.header }

// Purchase is what a successful attempt produced.
type Purchase struct {
	OrderID int64
	// Status is orders.StatusReserved for a seckill voucher (persisted
	// later by the workers) and orders.StatusCreated for the synchronous kinds.
	Status orders.Status
}

// BuyFunc completes an attempt: the rest of the chain after a gate.
type BuyFunc func(ctx context.Context, a *Attempt) (Purchase, error)

// Gate is one step in front of the buy. It may refuse the attempt by
// returning an error wrapping a seckill sentinel (ErrRateLimited,
// ErrCaptchaInvalid, ErrUnavailable, ErrSoldOut...) without calling next; it
// may wrap next (a circuit breaker runs it and counts the outcome); it may
// look at next's answer (the sold-out flag learns from ErrSoldOut). An error
// that has a method RetryAfter() time.Duration sets the Retry-After header
// (see [WithRetryAfter]); one with PublicMessage() string sets the message.
type Gate interface {
	Pass(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error)
}

// GateFunc adapts a function to a Gate.
type GateFunc func(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error)

// Pass calls f.
func (f GateFunc) Pass(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error) {
	return f(ctx, a, next)
}

// Gates are the pluggable steps of the edge (gateway/edge implements them). A nil field passes
// everything. The order is fixed by the gateway, not by the caller.
type Gates struct {
	// GlobalLimit bounds the buying rate of all shoppers together (429).
	GlobalLimit Gate
	// UserLimit bounds one shopper's buying rate, by Attempt.Request.UserID (429).
	UserLimit Gate
	// Captcha checks CaptchaID/CaptchaAnswer when Attempt.Voucher.CaptchaRequired (400 captcha_invalid).
	Captcha Gate
	// Breaker fails fast while the reservation path is failing or ops shut the door (503).
	Breaker Gate
	// SoldOut answers 409 sold_out from memory once a voucher is gone.
	SoldOut Gate
	// Credentials guards POST /api/v1/users and /api/v1/sessions against
	// password guessing, and GET /api/v1/captcha against floods, by client
	// IP (429).
	Credentials IPLimiter
	// CaptchaIssue bounds GET /api/v1/captcha by client IP (429), with its
	// own budget: shoppers behind one address must not lock each other out
	// of logging in by asking for captchas.
	CaptchaIssue IPLimiter
}

// IPLimiter admits or refuses one request from a client address. The address
// honours Config.TrustedProxies.
type IPLimiter interface {
	Allow(ctx context.Context, clientIP string) error
}

// chain builds the buying path once, at New, from the configured gates.
func (s *Server) chain() BuyFunc {
	g := s.deps.Gates
	steps := []Gate{g.GlobalLimit, g.UserLimit, GateFunc(s.voucherStep), g.Captcha, g.Breaker, g.SoldOut}
	h := BuyFunc(s.dispatch)
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i] == nil {
			continue
		}
		gate, next := steps[i], h
		h = func(ctx context.Context, a *Attempt) (Purchase, error) { return gate.Pass(ctx, a, next) }
	}
	return h
}

// voucherStep loads the voucher the attempt is for; an unknown voucher ends
// the attempt with 404 before any captcha or reservation.
func (s *Server) voucherStep(ctx context.Context, a *Attempt, next BuyFunc) (Purchase, error) {
	v, err := s.deps.Catalog.Cached(ctx, a.Request.VoucherID)
	if err != nil {
		return Purchase{}, err
	}
	a.Voucher = v
	return next(ctx, a)
}

// dispatch is the last step: the buyer that sells this kind of voucher.
func (s *Server) dispatch(ctx context.Context, a *Attempt) (Purchase, error) {
	if s.deps.SyncBuyer != nil && a.Voucher.Kind != seckill.KindSeckill {
		o, err := s.deps.SyncBuyer.Buy(ctx, a.Request)
		if err != nil {
			return Purchase{}, err
		}
		return Purchase{OrderID: o.ID, Status: o.Status}, nil
	}
	res, err := s.deps.Buyer.Buy(ctx, a.Request)
	if err != nil {
		return Purchase{}, err
	}
	return Purchase{OrderID: res.OrderID, Status: orders.StatusReserved}, nil
}
