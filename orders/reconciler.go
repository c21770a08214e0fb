package orders

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// Defaults of ReconcilerConfig.
const (
	DefaultGrace           = 30 * time.Second
	DefaultProducerTimeout = 10 * time.Second
	DefaultReconcileEvery  = 5 * time.Second
)

// Drain tells whether every queue message produced before t has been
// consumed and persisted (orders/kafkaq.Drain implements it for Kafka).
type Drain interface {
	DrainedBefore(ctx context.Context, t time.Time) (bool, error)
}

// ReconcilerConfig is what NewReconciler builds a Reconciler from; zero
// fields take defaults.
type ReconcilerConfig struct {
	// Record is where a release is decided (a failed order) first.
	Record Record
	// Stock holds the unconfirmed holds, and gets their stock back.
	Stock Stock
	// Drain tells when no message can be in flight for a hold.
	Drain Drain
	// Events, when set, is told of the holds recorded as failed.
	Events Events
	// Grace is how old an unconfirmed hold must be before it is looked at
	// (30 s). It must exceed ProducerTimeout.
	Grace time.Duration
	// ProducerTimeout is the longest a gateway may still be writing a
	// reservation's message after the reservation (its request timeout, 10 s).
	ProducerTimeout time.Duration
	// Every is the pause between passes (5 s).
	Every time.Duration
	Log   *slog.Logger
	// Metrics counts the releases (seckill_reconciler_released_total).
	Metrics *Metrics
	// Passes, when set, records each pass that met no error.
	Passes *Passes
}

// Reconciler ends reservations that would otherwise hold stock forever: a
// gateway that died between reserve.lua and the Kafka write leaves a hold in
// Redis with no message and no order. A hold older than the grace period is
// released only when no message can be in flight for it: the consumer group
// has committed past every message produced up to reservedAt + the
// producers' timeout (so its message, had it been written, is persisted), and
// no order exists. The decision is written first, as a failed order inserted
// ON CONFLICT DO NOTHING: if a worker's order got there first nothing is
// released; once the failed row exists a late message can only find it and
// fail too.
type Reconciler struct {
	store  Record
	stock  Stock
	drain  Drain
	events Events
	now    func() time.Time
	cfg    ReconcilerConfig
}

// NewReconciler returns a Reconciler.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.ProducerTimeout <= 0 {
		cfg.ProducerTimeout = DefaultProducerTimeout
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Grace <= cfg.ProducerTimeout {
		cfg.Grace = cfg.ProducerTimeout + time.Second
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultReconcileEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Reconciler{store: cfg.Record, stock: cfg.Stock, drain: cfg.Drain, events: cfg.Events, now: time.Now, cfg: cfg}
}

// Run reconciles every cfg.Every until ctx ends, then returns nil.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		if _, err := r.Pass(ctx); err != nil {
			if ctx.Err() == nil {
				r.cfg.Log.WarnContext(ctx, "reconcile", "err", err)
			}
		} else {
			r.cfg.Passes.reconciled(r.now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass looks at every active seckill voucher once and returns the orders it
// released as failed.
func (r *Reconciler) Pass(ctx context.Context) ([]Order, error) {
	ids, err := r.store.ActiveSeckillVoucherIDs(ctx, r.now().Add(-activeWindow))
	if err != nil {
		return nil, fmt.Errorf("orders: reconcile: %w", err)
	}
	var out []Order
	for _, id := range ids {
		list, err := r.Voucher(ctx, id)
		out = append(out, list...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// Voucher finishes the voucher's half-done stock moves, then reconciles its
// unconfirmed holds older than the grace period, oldest first; it stops at the first hold whose message may still
// be in flight (younger ones cannot be decided either).
func (r *Reconciler) Voucher(ctx context.Context, voucherID int64) ([]Order, error) {
	// Stock a dead mover left between two buckets would stay unsellable
	// until a buyer needed it; finish such moves first.
	if n, err := r.stock.FinishMoves(ctx, voucherID); err != nil {
		return nil, fmt.Errorf("orders: reconcile voucher %d: finish moves: %w", voucherID, err)
	} else if n > 0 {
		r.cfg.Log.WarnContext(ctx, "reconcile: finished stock moves between buckets that their mover left half done",
			"voucher_id", voucherID, "moves", n)
	}
	holds, err := r.stock.Pending(ctx, voucherID, r.now().Add(-r.cfg.Grace), 500)
	if err != nil {
		return nil, fmt.Errorf("orders: reconcile voucher %d: %w", voucherID, err)
	}
	var out []Order
	for _, h := range holds {
		drained, err := r.drain.DrainedBefore(ctx, h.ReservedAt.Add(r.cfg.ProducerTimeout))
		if err != nil {
			return out, fmt.Errorf("orders: reconcile: queue: %w", err)
		}
		if !drained {
			r.cfg.Log.DebugContext(ctx, "reconcile: workers lag; hold may still be on its way", "order_id", h.OrderID)
			return out, nil
		}
		o, inserted, err := r.store.InsertFailed(ctx, h)
		if err != nil {
			return out, fmt.Errorf("orders: reconcile: %w", err)
		}
		if !inserted {
			// A worker persisted it and has not confirmed yet (or died
			// before): its order owns the stock; nothing to release. Confirm
			// it here, so later passes do not look at it again.
			if err := r.stock.Confirm(ctx, []seckill.Reservation{h}); err != nil {
				return out, fmt.Errorf("orders: reconcile: confirm %d: %w", h.OrderID, err)
			}
			continue
		}
		if _, err := r.stock.Release(ctx, h.VoucherID, h.OrderID, seckill.ReleaseIfPending); err != nil {
			// The row stays flagged; the sweepers' release loop retries.
			return out, fmt.Errorf("orders: reconcile: release %d: %w", h.OrderID, err)
		}
		if err := r.store.ClearReleasePending(ctx, []int64{h.OrderID}); err != nil {
			return out, fmt.Errorf("orders: reconcile: %w", err)
		}
		o.ReleasePending = false
		r.cfg.Metrics.reconciledHolds(1)
		r.cfg.Log.WarnContext(ctx, "reconcile: released an orphaned hold", "order_id", h.OrderID,
			"voucher_id", h.VoucherID, "user_id", h.UserID, "reserved_at", h.ReservedAt)
		if r.events != nil {
			if err := r.events.Publish(ctx, Event{Order: o, At: r.now().UTC()}); err != nil {
				r.cfg.Log.WarnContext(ctx, "order event not published", "order_id", o.ID, "err", err)
			}
		}
		out = append(out, o)
	}
	return out, nil
}
