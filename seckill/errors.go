package seckill

import "errors"

// The buying domain's refusals. Each is wrapped with %w by the layer that
// meets it; the gateway's one error table (gateway/errors.go) maps them to
// HTTP beside the platform's kinds of seckill/apperr.
var (
	ErrSoldOut       = errors.New("sold out")
	ErrLimitExceeded = errors.New("per-user limit exceeded")
	ErrNotStarted    = errors.New("sale not started")
	ErrEnded         = errors.New("sale ended")
	// ErrSalePaused: the operator paused this voucher's sale (503 with
	// Retry-After: the pause is meant to end).
	ErrSalePaused = errors.New("sale paused")
	// ErrNotAdmitted: a buy of a voucher with a waiting room without a valid
	// admission pass (missing, forged, expired, used, or another's).
	ErrNotAdmitted = errors.New("not admitted")
	// ErrUnpaidLimit: the shopper let too many holds expire unpaid, or
	// cancelled them, recently (seckill/hoard); new holds are refused until
	// the oldest counted one leaves the window.
	ErrUnpaidLimit = errors.New("unpaid limit")
	// ErrNotEligible: joining a voucher's line or draw that takes entries
	// only with the merchant's entry token, or only from its allowlist,
	// without a valid one (seckill/eligibility).
	ErrNotEligible = errors.New("not eligible")
)

// ErrStockMissing marks a reservation refused because the fast store has no
// state for the voucher: Redis lost it (a restart without its data, a wipe)
// or a repair took it off sale while it rebuilds it. The stores wrap it
// together with apperr.ErrUnavailable, so a caller that knows nothing of it
// answers 503; the Buyer, which knows the voucher exists, turns it into an answer
// that says when to retry (or into ErrEnded for a sale whose keys expired).
var ErrStockMissing = errors.New("stock state missing")

// ErrNotQueued marks a Queue.Publish failure in which the message certainly
// never reached the queue (it was not handed over, or the queue refused it
// before writing). Only then may the reservation be given back at once; after
// any other failure the message may still be written, and the hold must stay
// until a worker persists it or the reconciler decides it never came.
var ErrNotQueued = errors.New("not queued")

// ErrOutcomeUnknown marks a failed buy whose reservation stays held because
// its order may still be made: the queue was handed the message but did not
// acknowledge it in time (see ErrNotQueued for the failures that hold
// nothing). It is wrapped together with apperr.ErrUnavailable, so the
// shopper is answered 503; what the attempt spent (a waiting room's pass) must stay
// spent, because the message may land: only a retry with the same
// Idempotency-Key, which replays that order, may use it again.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// ErrUndecided marks a replayed Idempotency-Key whose first order's fate is
// not decided yet: the gateway that made its hold does not know yet whether
// its message was written, and may still fence the order or give the hold
// back (seckill/RULES.md, "A 202 stands"). Such a replay must not be
// answered with the order. The stores wrap it together with
// apperr.ErrUnavailable; the Buyer waits for the decision a while and then
// answers 503 with a Retry-After, as for ErrOutcomeUnknown.
var ErrUndecided = errors.New("the first order of this Idempotency-Key is not decided yet")
