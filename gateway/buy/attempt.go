package buy

import (
	"strings"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// Attempt is one shopper's buy request as it travels through the pipeline.
// Every string in it is the caller's own copy, safe to keep after the
// request.
type Attempt struct {
	// Request is what the seller gets: voucher, user (from the token),
	// quantity and Idempotency-Key, already validated.
	Request seckill.BuyRequest
	// CaptchaID and CaptchaAnswer are as the shopper sent them (possibly
	// empty); the captcha step judges them.
	CaptchaID     string
	CaptchaAnswer string
	// ChallengeID and ChallengeAnswer are a proof of work as the shopper
	// sent them (possibly empty); steps 1 and 6 judge them.
	ChallengeID     string
	ChallengeAnswer string
	// ClientKey is the client's address as the per-address limits key it:
	// the address for IPv4, its /56 for IPv6.
	ClientKey string
	// Voucher is the catalog's copy of the voucher, set by the catalog
	// step (also when that step refuses the attempt; unset for an unknown
	// voucher). Its StockLeft is at most a moment old: the reservation is the
	// only judge of stock.
	Voucher seckill.Voucher
	// Pass is the Seckill-Pass header as the shopper sent it (possibly
	// empty); a voucher with a waiting room takes one (pass.go).
	Pass string
	// Limiter is the step whose limit refused the attempt with 429
	// (StepAddressLimit, StepUserLimit or StepGlobalLimit); empty
	// otherwise. The sale report counts refusals by limit.
	Limiter string

	// header is what SetHeader set, in the order first set: a handful of
	// fields on every buy, which the gateway copies to the answer as they
	// are (no map to build and range over).
	header []HeaderField
}

// HeaderField is one header of the answer.
type HeaderField struct{ Key, Value string }

// SetHeader adds a header to the answer, whatever it turns out to be: a rate
// limiter's RateLimit-* headers on a 202 as on a 429. Setting a key again
// (compared as HTTP compares header names, ignoring case) replaces its
// value.
func (a *Attempt) SetHeader(key, value string) {
	for i := range a.header {
		if strings.EqualFold(a.header[i].Key, key) {
			a.header[i].Value = value
			return
		}
	}
	if a.header == nil {
		a.header = make([]HeaderField, 0, 6)
	}
	a.header = append(a.header, HeaderField{key, value})
}

// Headers returns the headers set so far, in the order first set (nil when
// none). The slice is the attempt's: read it, do not change it.
func (a *Attempt) Headers() []HeaderField { return a.header }

// Header returns the value set for key, compared ignoring case ("" when
// none).
func (a *Attempt) Header(key string) string {
	for _, h := range a.header {
		if strings.EqualFold(h.Key, key) {
			return h.Value
		}
	}
	return ""
}

// Purchase is what a successful attempt produced.
type Purchase struct {
	OrderID int64
	// Status is orders.StatusReserved for a seckill voucher (persisted
	// later by the workers) and orders.StatusCreated for the synchronous
	// kinds. For a replay, Pipeline.Buy answers the order's current status.
	Status orders.Status
	// Replayed is true when the attempt's Idempotency-Key named an order
	// made before: nothing was sold now, and Status is only what the step
	// that answered knew.
	Replayed bool
}

// Sale is a seller's answer: the purchase, and what the stock said was left.
type Sale struct {
	Purchase
	// StockLeft is what the stock said was left after this attempt, a
	// refusal included, when StockKnown; the sold-out flag learns from it.
	StockLeft  int64
	StockKnown bool
}
