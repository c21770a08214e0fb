package gateway

import (
	"context"
	"errors"
	"net/http"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// The buying route runs this chain (the README, "The purchase path"); auth
// and the decoding of the request come first, in the handler, and cost no
// I/O:
//
//	catalog → BuyAddress → UserLimit → GlobalLimit → Captcha → Breaker → SoldOut → buy
//
// For a voucher with a waiting room, the catalog step also refuses a pass
// its signature refuses, and "buy" first claims the pass (queue.go).
//
// The catalog comes first: what is certainly useless is refused from memory
// before any budget is charged. Then the limits go from the narrowest budget to the widest, so that what one
// client sends is refused by its own budget before it can charge a shared
// one: a request refused by its address's limit charges neither the user's
// nor the global one, and one refused by the user's limit never charges the
// global one. An account flooding the buy button therefore spends its own
// few requests a second and nothing that other shoppers need, and an
// address sending for many accounts spends its address's budget. The
// address limit comes first also because it costs no I/O, so a flood from
// one address never reaches Redis; the per-user limit is the one round trip
// of the three.
//
// Each named step of Gates is optional (nil lets every attempt pass), so the
// gates of the edge issue drop in without reshaping the handler. "catalog" is
// the gateway's own step (catalogGate, catalog.go), first so that what is
// certainly useless (an unknown, paused, not yet or no longer on sale, or
// sold-out voucher) is answered from memory before any limiter is charged:
// it loads the voucher into Attempt.Voucher, so that the captcha gate can
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
	// ClientKey is the client's address as the per-address limits key it:
	// the address for IPv4, its /56 for IPv6 (see clientKey).
	ClientKey string
	// Voucher is the catalog's copy of the voucher (Catalog.Voucher), set
	// by the first gate. Its StockLeft is at most a moment old: the
	// reservation is the only judge of stock.
	Voucher seckill.Voucher
	// Pass is the Seckill-Pass header as the shopper sent it (possibly
	// empty); a voucher with a waiting room takes one (queue.go).
	Pass string

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
	// For a replay, the gateway answers the order's current status instead.
	Status orders.Status
	// Replayed is true when the attempt's Idempotency-Key named an order
	// made before: nothing was sold now, and Status is only what the step
	// that answered knew.
	Replayed bool
}

// BuyFunc completes an attempt: the rest of the chain after a gate.
type BuyFunc func(ctx context.Context, a *Attempt) (Purchase, error)

// Gate is one step in front of the buy. It may refuse the attempt by
// returning an error wrapping a seckill sentinel (ErrRateLimited,
// ErrCaptchaInvalid, ErrUnavailable, ErrSoldOut...) without calling next; it
// may wrap next (a circuit breaker runs it and counts the outcome); it may
// look at next's answer (the sold-out flag learns from ErrSoldOut). An error
// that has a method RetryAfter() time.Duration sets the Retry-After header
// (see [seckill.WithRetryAfter]); one with PublicMessage() string sets the message.
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
	// BuyAddress bounds the buying rate of one client address (an IPv6
	// /56), by Attempt.ClientKey, before any other limit (429).
	BuyAddress Gate
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
	// Anonymous bounds every anonymous route by client address (the
	// catalog, captcha, registration, login and the WebSocket handshake;
	// see Server.perAddress) before it does any work (429). It must cost no
	// I/O: the catalog is served from memory and this limit is in front of it.
	Anonymous IPLimiter
	// LoginName bounds the failed logins of one username, whatever the
	// addresses they come from (429): a credential-stuffing bot rotating
	// addresses still meets it.
	LoginName NameLimiter
	// Shopper bounds the signed-in routes other than the buy (a shopper's
	// orders, one order, pay, cancel, the waiting room's join and read) by
	// user and by client address, after the token is verified and before the
	// route does any work (429; see Server.perShopper).
	Shopper ShopperLimiter
}

// ShopperLimiter admits or refuses one request of a signed-in shopper from a
// client address (Server.clientKey's key). set receives the RateLimit
// headers of the answer, whatever it turns out to be.
type ShopperLimiter interface {
	Allow(ctx context.Context, userID int64, clientKey string, set func(key, value string)) error
}

// NameLimiter bounds the failed logins of one username. A login takes one
// unit of the username's budget before its password is checked, atomically,
// so concurrent guesses cannot all pass a check made before any of them is
// charged; a login that did not fail on its password gives the unit back.
type NameLimiter interface {
	// Take charges one login to the username, or refuses it
	// (ErrRateLimited, charging nothing) when its budget is spent.
	Take(ctx context.Context, username string) error
	// Refund gives back the unit Take charged, for a login that was not a
	// wrong password.
	Refund(ctx context.Context, username string)
}

// IPLimiter admits or refuses one request from a client address. The key is
// Server.clientKey's: the address for IPv4, the /56 for IPv6, and it honours
// Config.TrustedProxies.
type IPLimiter interface {
	Allow(ctx context.Context, clientIP string) error
}

// chain builds the buying path once, at New, from the configured gates.
func (s *Server) chain() BuyFunc {
	return s.deps.Gates.Chain(GateFunc(s.catalogGate), s.admitThenBuy)
}

// Chain joins the gates in the gateway's fixed order (see the top of this
// file) in front of last, with catalog as the first step, the one that
// fills Attempt.Voucher. Nil gates are left out. The gateway builds its
// buying path with it; tests of the gates build the same path with their
// own catalog step and last step.
func (g Gates) Chain(catalog Gate, last BuyFunc) BuyFunc {
	steps := []Gate{catalog, g.BuyAddress, g.UserLimit, g.GlobalLimit, g.Captcha, g.Breaker, g.SoldOut}
	h := last
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i] == nil {
			continue
		}
		gate, next := steps[i], h
		h = func(ctx context.Context, a *Attempt) (Purchase, error) { return gate.Pass(ctx, a, next) }
	}
	return h
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
	return Purchase{OrderID: res.OrderID, Status: orders.StatusReserved, Replayed: res.Replayed}, nil
}

// replayStatus is the current status of a replayed attempt's order: the
// reservation replayed only knows it was reserved once. A synchronous kind's
// replay already carries its order's status from PostgreSQL. An order that
// neither PostgreSQL nor a live hold knows was released without a record:
// it can never become one, which is failed.
func (s *Server) replayStatus(ctx context.Context, userID int64, p Purchase) (orders.Status, error) {
	if !p.Replayed || p.Status != orders.StatusReserved {
		return p.Status, nil
	}
	o, err := s.deps.Orders.Get(ctx, userID, p.OrderID)
	switch {
	case errors.Is(err, seckill.ErrNotFound):
		return orders.StatusFailed, nil
	case err != nil:
		return "", err
	}
	return o.Status, nil
}
