package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
)

// releaseTimeout bounds the Redis step after a committed cancellation.
const releaseTimeout = 5 * time.Second

// Lifecycle moves persisted orders on: pay, cancel (by the shopper or by the
// payment timeout) and the Redis release that follows a cancellation.
//
// A cancellation is two steps that cannot share a transaction: PostgreSQL
// (status, stock, per-user count and the redis_release_pending flag, in one
// transaction) and then Redis (release.lua in mode any). The flag is an
// outbox: whoever dies between the two steps leaves a flagged row, and
// ReleaseOwed (run in a loop by every sweeper) releases it later. release.lua
// tombstones the order, so doing the Redis step again never gives the stock
// back twice.
type Lifecycle struct {
	store   Record
	stock   Stock
	events  Events
	strikes Strikes
	log     *slog.Logger
	now     func() time.Time
	pay     payments
}

// LifecycleConfig is what NewLifecycle builds a Lifecycle from.
type LifecycleConfig struct {
	// Record holds the orders; every transition is one of its
	// transactions.
	Record Record
	// Stock gets the stock of cancelled orders back.
	Stock Stock
	// Events, when set, is told every status change.
	Events Events
	// Strikes, when set, counts against its shopper every order cancelled
	// by its shopper or by the payment timeout (seckill/hoard).
	Strikes Strikes
	// Log; slog.Default() when nil.
	Log *slog.Logger

	// Payments, when set with Provider, takes payments through a provider
	// (see StartPayment); without them the sweeper cancels as before.
	Payments PaymentRecord
	// Provider takes the money (orders/payment).
	Provider payment.Provider
	// Currency is the ISO 4217 currency of every payment (CNY when empty).
	Currency string
	// PaymentMetrics counts payments, events and late refunds.
	PaymentMetrics *PaymentMetrics
}

// NewLifecycle returns a Lifecycle.
func NewLifecycle(cfg LifecycleConfig) *Lifecycle {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Currency == "" {
		cfg.Currency = DefaultCurrency
	}
	return &Lifecycle{store: cfg.Record, stock: cfg.Stock, events: cfg.Events, strikes: cfg.Strikes, log: cfg.Log, now: time.Now,
		pay: payments{record: cfg.Payments, provider: cfg.Provider, currency: payment.NormalizeCurrency(cfg.Currency), metrics: cfg.PaymentMetrics}}
}

// Pay pays the user's order (simulated: this stands where a payment
// provider's callback would). Only the owner, only a created order before
// its pay_deadline; the loser of a race with a cancellation gets ErrConflict.
// Paying a paid order returns it unchanged (and announces nothing), so a
// client may retry a pay whose answer it lost.
//
// With a payment provider other than the demo one, only the provider's word
// pays an order: Pay answers ErrPayThroughProvider.
func (l *Lifecycle) Pay(ctx context.Context, userID, orderID int64) (Order, error) {
	if !l.pay.direct() {
		return Order{}, ErrPayThroughProvider
	}
	o, err := l.store.Pay(ctx, userID, orderID)
	if errors.Is(err, ErrAlready) {
		return o, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("orders: pay: %w", err)
	}
	l.publish(ctx, o)
	return o, nil
}

// Cancel cancels the user's created order and gives its stock back in
// PostgreSQL and then in Redis. If the Redis step fails the order is still
// cancelled (the answer is the cancelled order) and the release loop
// finishes the Redis step. Cancelling a cancelled order returns it unchanged,
// like a repeated pay: a retry, whoever cancelled it first.
func (l *Lifecycle) Cancel(ctx context.Context, userID, orderID int64) (Order, error) {
	o, err := l.store.Cancel(ctx, userID, orderID)
	if errors.Is(err, ErrAlready) {
		return o, nil
	}
	if err != nil {
		return Order{}, fmt.Errorf("orders: cancel: %w", err)
	}
	l.strike(ctx, o)
	list, announce := l.release(ctx, []Order{o})
	l.publish(ctx, announce...)
	return list[0], nil
}

// release gives the stock of freshly cancelled orders back in Redis and
// clears their flags. Failures are logged and left to ReleaseOwed; the
// orders are returned with ReleasePending as it now is.
//
// announce is the orders whose change is to be published now: those with
// nothing to release, and those this call released. Whoever's release.lua
// call gives an order's stock back (here, or ReleaseOwed in any sweeper)
// announces it, exactly once: so a transition whose caller died at the
// commit, or whose Redis step failed, is still announced when the release
// loop finishes it, and never twice by racing sweepers.
func (l *Lifecycle) release(ctx context.Context, list []Order) (_ []Order, announce []Order) {
	// The PostgreSQL step is committed: finish the Redis step even when the
	// caller is going away (shutdown, a client that hung up), so little is
	// left to the release loop.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var done []int64
	for i, o := range list {
		if !o.ReleasePending {
			announce = append(announce, o)
			continue
		}
		gaveBack, err := l.stock.Release(ctx, o.VoucherID, o.ID, seckill.ReleaseAny)
		if err != nil {
			l.log.WarnContext(ctx, "redis release failed; the release loop retries it", "order_id", o.ID, "err", err)
			continue
		}
		done = append(done, o.ID)
		list[i].ReleasePending = false
		if gaveBack {
			announce = append(announce, list[i])
		}
	}
	if len(done) > 0 {
		if err := l.store.ClearReleasePending(ctx, done); err != nil {
			// Released in Redis but still flagged: the loop releases again,
			// which release.lua turns into a no-op.
			l.log.WarnContext(ctx, "release flag not cleared; the release loop clears it", "err", err)
		}
	}
	return list, announce
}

// ReleaseOwed releases in Redis up to max orders whose PostgreSQL
// transition is done but whose Redis release is not (the outbox), and
// clears their flags. It returns how many it cleared, and the first error.
// Safe to run in any number of processes: a release happens once per order.
func (l *Lifecycle) ReleaseOwed(ctx context.Context, max int) (int, error) {
	list, err := l.store.ReleasePending(ctx, max)
	if err != nil {
		return 0, fmt.Errorf("orders: release owed: %w", err)
	}
	var done []int64
	var announce []Order
	var first error
	for _, o := range list {
		gaveBack, err := l.stock.Release(ctx, o.VoucherID, o.ID, seckill.ReleaseAny)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("orders: release order %d: %w", o.ID, err)
			}
			continue
		}
		done = append(done, o.ID)
		// See release: whoever gives the stock back announces the order
		// as it is, unless it is refunded by now: money that came after
		// the cancel, whose refund announced the order itself.
		if gaveBack && o.Status != StatusRefunded {
			o.ReleasePending = false
			announce = append(announce, o)
		}
	}
	l.publish(ctx, announce...)
	if len(done) > 0 {
		if err := l.store.ClearReleasePending(ctx, done); err != nil {
			return 0, fmt.Errorf("orders: release owed: %w", err)
		}
	}
	return len(done), first
}

// CancelExpired cancels one batch of up to max orders past their pay
// deadline, releases them in Redis and publishes their events. It returns
// the orders it cancelled.
func (l *Lifecycle) CancelExpired(ctx context.Context, max int) ([]Order, error) {
	list, err := l.store.CancelExpired(ctx, max)
	if err != nil {
		return nil, fmt.Errorf("orders: cancel expired: %w", err)
	}
	asked, err := l.cancelDuePayments(ctx, max)
	if err != nil {
		l.log.WarnContext(ctx, "sweep: orders with a pending payment not settled", "err", err)
	}
	list = append(list, asked...)
	if len(list) == 0 {
		return nil, nil
	}
	l.strike(ctx, list...)
	list, announce := l.release(ctx, list)
	l.publish(ctx, announce...)
	return list, nil
}

// strike counts freshly cancelled orders against their shoppers. Only the
// call that committed a cancellation gets here (a repeated cancel returns
// ErrAlready before), and a strike is counted once per order anyway. A
// failure is logged: the cancellation stands, and a shopper spared one
// strike costs less than a refused cancel.
func (l *Lifecycle) strike(ctx context.Context, list ...Order) {
	if l.strikes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	at := l.now()
	strikes := make([]hoard.Strike, len(list))
	for i, o := range list {
		strikes[i] = hoard.Strike{UserID: o.UserID, OrderID: o.ID, At: at}
	}
	if err := l.strikes.Record(ctx, strikes...); err != nil {
		l.log.WarnContext(ctx, "unpaid strikes not recorded", "orders", len(list), "err", err)
	}
}

func (l *Lifecycle) publish(ctx context.Context, list ...Order) {
	if l.events == nil {
		return
	}
	// The transitions are committed: their buyers are told even if the
	// caller has gone away meanwhile (a shopper who hung up, a sweeper
	// stopping).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	at := l.now().UTC()
	for _, o := range list {
		if err := l.events.Publish(ctx, Event{Order: o, At: at}); err != nil {
			l.log.WarnContext(ctx, "order event not published", "order_id", o.ID, "status", o.Status, "err", err)
		}
	}
}
