package orders

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// SyncBuyer sells limit and common vouchers straight into PostgreSQL: the
// order is created at once (status created, with its pay deadline), and from
// there shares the lifecycle of every order: pay, cancel, timeout. The
// per-user limit of a limit voucher is enforced in the same transaction by
// the voucher_buyers row's lock (a conditional upsert), not by a Redis lock:
// the lock lives with the data it protects and cannot be lost on a failover.
type SyncBuyer struct {
	store      Record
	ids        seckill.OrderIDs
	events     Events
	payTimeout time.Duration
	log        *slog.Logger
}

// SyncBuyerConfig is what NewSyncBuyer builds a SyncBuyer from; zero fields
// take defaults.
type SyncBuyerConfig struct {
	// Record sells, one transaction a buy.
	Record Record
	// IDs gives the order ids.
	IDs seckill.OrderIDs
	// Events, when set, is told of every order created.
	Events Events
	// PayTimeout is how long an order waits for payment
	// (DefaultPayTimeout).
	PayTimeout time.Duration
	// Log; slog.Default() when nil.
	Log *slog.Logger
}

// NewSyncBuyer returns a SyncBuyer.
func NewSyncBuyer(cfg SyncBuyerConfig) *SyncBuyer {
	if cfg.PayTimeout <= 0 {
		cfg.PayTimeout = DefaultPayTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &SyncBuyer{store: cfg.Record, ids: cfg.IDs, events: cfg.Events, payTimeout: cfg.PayTimeout, log: cfg.Log}
}

// Buy creates the order or returns ErrSoldOut, ErrLimitExceeded,
// ErrNotStarted, ErrEnded or ErrNotFound. A replayed request key returns the
// first order with replayed set: nothing was sold now, which the sale
// report counts apart from a new order.
func (b *SyncBuyer) Buy(ctx context.Context, req seckill.BuyRequest) (o Order, replayed bool, err error) {
	id := b.ids.Next()
	o, err = b.store.BuySync(ctx, id, req, b.payTimeout)
	if err != nil {
		return Order{}, false, fmt.Errorf("orders: buy: %w", err)
	}
	if o.ID != id {
		return o, true, nil
	}
	if b.events != nil {
		if err := b.events.Publish(ctx, Event{Order: o, At: time.Now().UTC()}); err != nil {
			b.log.WarnContext(ctx, "order event not published", "order_id", o.ID, "status", o.Status, "err", err)
		}
	}
	return o, false, nil
}
