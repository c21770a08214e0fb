package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// BuyRequest is one shopper's attempt to buy a seckill voucher.
type BuyRequest struct {
	VoucherID  int64
	UserID     int64
	Quantity   int64
	RequestKey string // the Idempotency-Key, or "" for a fresh attempt
	// EndsAt is the end of the voucher's sale as the caller's copy of the
	// voucher says (zero when unknown). It is read only when the fast store
	// has no state for the voucher, to tell a sale whose keys expired after
	// it ended (ErrEnded) from one that is being restored (ErrUnavailable).
	EndsAt time.Time
}

// Validate checks the parts a shopper controls, with the same rules as
// Reservation.Validate. A missing user is a failed login, not bad input.
func (r BuyRequest) Validate() error {
	if r.UserID <= 0 {
		return Public(ErrUnauthenticated, "bad user id")
	}
	return Reservation{VoucherID: r.VoucherID, UserID: r.UserID, Quantity: r.Quantity, RequestKey: r.RequestKey}.validateRequest()
}

// Buyer runs the asynchronous purchase: reserve in the stock, then hand the
// reservation to the queue; if the queue cannot take it, give the stock back.
type Buyer struct {
	stock Stock
	queue Queue
	ids   OrderIDs
	log   *slog.Logger
	now   func() time.Time
	heals HealRequests
	keyed KeyedOrders
}

// HealRequests asks the fleet's healers to restore a voucher whose state the
// fast store lost (seckill/redisstock implements it). It must be cheap and
// must not block the buy: it is called on the buying path.
type HealRequests interface {
	RequestHeal(ctx context.Context, voucherID int64)
}

// KeyedOrders finds the order a request key gave, in the record
// (orders/pgstore implements it). It answers replays the fast store can no
// longer answer: after a sale's keys expired, or while they are rebuilt.
type KeyedOrders interface {
	OrderIDByRequestKey(ctx context.Context, userID, voucherID int64, key string) (int64, bool, error)
}

// BuyerOption changes how NewBuyer builds a Buyer.
type BuyerOption func(*Buyer)

// WithHealRequests makes the Buyer ask h to restore a voucher the fast
// store has no state for.
func WithHealRequests(h HealRequests) BuyerOption { return func(b *Buyer) { b.heals = h } }

// WithKeyedOrders lets the Buyer answer a replayed request key from the
// record when the fast store has no state for the voucher.
func WithKeyedOrders(k KeyedOrders) BuyerOption { return func(b *Buyer) { b.keyed = k } }

// RestoreRetryAfter is the Retry-After of a buy refused while a voucher's
// fast-store state is being restored: a heal takes seconds, not minutes.
const RestoreRetryAfter = 2 * time.Second

// NewBuyer returns a Buyer over the given stock, queue and id source.
func NewBuyer(stock Stock, queue Queue, ids OrderIDs, log *slog.Logger, opts ...BuyerOption) *Buyer {
	b := &Buyer{stock: stock, queue: queue, ids: ids, log: log, now: time.Now}
	for _, o := range opts {
		o(b)
	}
	return b
}

// restoringError is the refusal of a buy while the voucher's fast-store
// state is missing: 503 with a Retry-After and a sentence a shopper can act on.
type restoringError struct{ err error }

func (e *restoringError) Error() string { return e.err.Error() }
func (e *restoringError) Unwrap() error { return e.err }

// RetryAfter is read by the gateway for the Retry-After header.
func (e *restoringError) RetryAfter() time.Duration { return RestoreRetryAfter }

// PublicMessage is what the shopper reads.
func (e *restoringError) PublicMessage() string {
	return "this sale is being restored after a fault; please try again in a few seconds"
}

// stockMissing answers a buy whose reservation found no state for the
// voucher in the fast store. The caller knows the voucher exists (the
// gateway looked it up), so this is never "not found": a replayed key is
// answered from the record, a sale past its end is ended, and anything else
// is told to come back while the healers restore the voucher.
func (b *Buyer) stockMissing(ctx context.Context, req BuyRequest, err error) (ReserveResult, error) {
	if req.RequestKey != "" && b.keyed != nil {
		id, found, kerr := b.keyed.OrderIDByRequestKey(ctx, req.UserID, req.VoucherID, req.RequestKey)
		if kerr == nil && found {
			return ReserveResult{OrderID: id, Replayed: true}, nil
		}
	}
	if !req.EndsAt.IsZero() && !b.now().Before(req.EndsAt) {
		return ReserveResult{}, fmt.Errorf("%w: voucher %d (its sale state has expired)", ErrEnded, req.VoucherID)
	}
	if b.heals != nil {
		b.heals.RequestHeal(ctx, req.VoucherID)
	}
	return ReserveResult{}, &restoringError{err: err}
}

// Buy reserves and enqueues. On success the reservation is on its way to the
// workers; a replayed request key returns the first reservation's order id
// without holding anything again. A refusal of the stock still carries its
// StockLeft.
func (b *Buyer) Buy(ctx context.Context, req BuyRequest) (ReserveResult, error) {
	if err := req.Validate(); err != nil {
		return ReserveResult{}, err
	}
	r := Reservation{
		OrderID:    b.ids.Next(),
		VoucherID:  req.VoucherID,
		UserID:     req.UserID,
		Quantity:   req.Quantity,
		RequestKey: req.RequestKey,
		ReservedAt: b.now().UTC(),
	}
	res, err := b.stock.Reserve(ctx, r)
	if errors.Is(err, ErrStockMissing) {
		return b.stockMissing(ctx, req, err)
	}
	if err != nil {
		// A refusal keeps the stock's count: a sold-out answer says
		// whether none is left or too few (the gateway's sold-out flag).
		return ReserveResult{StockLeft: res.StockLeft}, err
	}
	if res.Replayed {
		return res, nil
	}
	if err := b.queue.Publish(ctx, r); err != nil {
		if !errors.Is(err, ErrNotQueued) {
			// The message may still land: keep the hold. A worker persists
			// it if it does; the reconciler releases it once the workers are
			// past every message that could carry it. A retry of the same
			// Idempotency-Key is answered with this order meanwhile. The
			// caller is told the outcome is unknown, not that nothing was
			// bought: it must not give back what the attempt spent.
			b.log.WarnContext(ctx, "reservation queued without acknowledgement; keeping the hold for the workers or the reconciler",
				"order_id", r.OrderID, "voucher_id", r.VoucherID, "err", err)
			return ReserveResult{}, fmt.Errorf("%w: %w: the order could not be confirmed yet: %w", ErrUnavailable, ErrOutcomeUnknown, err)
		}
		// The message does not exist, so the hold must not outlive this
		// call. A context that is already done must not stop the release.
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, relErr := b.stock.Release(relCtx, r.VoucherID, r.OrderID, ReleaseUnsent); relErr != nil {
			// The reconciler finds and releases this hold after its grace period.
			b.log.ErrorContext(ctx, "reservation not queued and not released; the reconciler will release it",
				"order_id", r.OrderID, "voucher_id", r.VoucherID, "queue_error", err, "release_error", relErr)
		}
		return ReserveResult{}, fmt.Errorf("%w: queue: %w", ErrUnavailable, err)
	}
	return res, nil
}
