package orders

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// SyncStore sells the synchronous kinds in one transaction (orders/pgstore
// implements it).
type SyncStore interface {
	BuySync(ctx context.Context, orderID int64, req seckill.BuyRequest, payTimeout time.Duration) (Order, error)
}

// SyncBuyer sells limit and common vouchers straight into PostgreSQL: the
// order is created at once (status created, with its pay deadline), and from
// there shares the lifecycle of every order: pay, cancel, timeout. The
// per-user limit of a limit voucher is enforced in the same transaction by
// the voucher_buyers row's lock (a conditional upsert), not by a Redis lock:
// the lock lives with the data it protects and cannot be lost on a failover.
type SyncBuyer struct {
	store      SyncStore
	ids        seckill.OrderIDs
	events     Events
	payTimeout time.Duration
	log        *slog.Logger
}

// NewSyncBuyer returns a SyncBuyer. payTimeout <= 0 means DefaultPayTimeout;
// events may be nil.
func NewSyncBuyer(store SyncStore, ids seckill.OrderIDs, events Events, payTimeout time.Duration, log *slog.Logger) *SyncBuyer {
	if payTimeout <= 0 {
		payTimeout = DefaultPayTimeout
	}
	if log == nil {
		log = slog.Default()
	}
	return &SyncBuyer{store: store, ids: ids, events: events, payTimeout: payTimeout, log: log}
}

// Buy creates the order or returns ErrSoldOut, ErrLimitExceeded,
// ErrNotStarted, ErrEnded or ErrNotFound. A replayed request key returns the
// first order.
func (b *SyncBuyer) Buy(ctx context.Context, req seckill.BuyRequest) (Order, error) {
	id := b.ids.Next()
	o, err := b.store.BuySync(ctx, id, req, b.payTimeout)
	if err != nil {
		return Order{}, fmt.Errorf("orders: buy: %w", err)
	}
	if o.ID == id && b.events != nil {
		if err := b.events.Publish(ctx, Event{Order: o, At: time.Now().UTC()}); err != nil {
			b.log.WarnContext(ctx, "order event not published", "order_id", o.ID, "status", o.Status, "err", err)
		}
	}
	return o, nil
}
