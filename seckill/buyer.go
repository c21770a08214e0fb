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
}

// Validate checks the parts a shopper controls.
func (r BuyRequest) Validate() error {
	switch {
	case r.VoucherID <= 0:
		return Invalidf("bad voucher id")
	case r.UserID <= 0:
		return Public(ErrUnauthenticated, "bad user id")
	case r.Quantity < 1 || r.Quantity > MaxQuantity:
		return Invalidf("quantity must be 1 to %d", MaxQuantity)
	case len(r.RequestKey) > MaxRequestKey:
		return Invalidf("Idempotency-Key is longer than %d characters", MaxRequestKey)
	}
	return nil
}

// Buyer runs the asynchronous purchase: reserve in the stock, then hand the
// reservation to the queue; if the queue cannot take it, give the stock back.
type Buyer struct {
	stock Stock
	queue Queue
	ids   OrderIDs
	log   *slog.Logger
	now   func() time.Time
}

// NewBuyer returns a Buyer over the given stock, queue and id source.
func NewBuyer(stock Stock, queue Queue, ids OrderIDs, log *slog.Logger) *Buyer {
	return &Buyer{stock: stock, queue: queue, ids: ids, log: log, now: time.Now}
}

// Buy reserves and enqueues. On success the reservation is on its way to the
// workers; a replayed request key returns the first reservation's order id
// without holding anything again.
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
	if err != nil {
		return ReserveResult{}, err
	}
	if res.Replayed {
		return res, nil
	}
	if err := b.queue.Publish(ctx, r); err != nil {
		if !errors.Is(err, ErrNotQueued) {
			// The message may still land: keep the hold. A worker persists
			// it if it does; the reconciler releases it once the workers are
			// past every message that could carry it. A retry of the same
			// Idempotency-Key is answered with this order meanwhile.
			b.log.WarnContext(ctx, "reservation queued without acknowledgement; keeping the hold for the workers or the reconciler",
				"order_id", r.OrderID, "voucher_id", r.VoucherID, "err", err)
			return ReserveResult{}, fmt.Errorf("%w: the order could not be confirmed yet: %w", ErrUnavailable, err)
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
