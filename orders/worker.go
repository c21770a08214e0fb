package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// DefaultPayTimeout is how long a created order waits for payment.
const DefaultPayTimeout = 15 * time.Minute

// Events publishes order status changes to every gateway.
type Events interface {
	Publish(ctx context.Context, e Event) error
}

// Worker persists batches of reservations: the handler the Kafka consumer
// calls. Every step is idempotent, so a batch may be handed to it again and
// again (redelivery, retry after an error) and still end the same.
type Worker struct {
	store      Record
	stock      Stock
	events     Events
	payTimeout time.Duration
	log        *slog.Logger
	now        func() time.Time
	metrics    *Metrics
	failed     func(seckill.Reservation)
}

// WorkerConfig is what NewWorker builds a Worker from; zero fields take
// defaults.
type WorkerConfig struct {
	// Record is where the orders are persisted.
	Record Record
	// Stock is confirmed and released after each batch.
	Stock Stock
	// Events, when set, is told every status change.
	Events Events
	// PayTimeout is added to the persist time for pay_deadline
	// (DefaultPayTimeout when zero).
	PayTimeout time.Duration
	Log        *slog.Logger
	// Metrics, when set, records persist latency and the orders created
	// and failed (see NewMetrics).
	Metrics *Metrics
	// Failed, when set, is told once of each reservation this worker
	// recorded as failed, whose units go back on sale (the sale report
	// counts them); a redelivered batch does not tell it again. It must
	// not block.
	Failed func(r seckill.Reservation)
}

// NewWorker returns a Worker.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.PayTimeout <= 0 {
		cfg.PayTimeout = DefaultPayTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Worker{
		store: cfg.Record, stock: cfg.Stock, events: cfg.Events,
		payTimeout: cfg.PayTimeout, log: cfg.Log, now: time.Now, metrics: cfg.Metrics, failed: cfg.Failed,
	}
}

// Handle persists batch and finishes what follows in Redis: created orders
// are confirmed, failed ones released (then their release_pending flag
// cleared), and a status event published for each. It returns an error when
// PostgreSQL or Redis could not be reached; the caller retries the whole
// batch, which is safe: a second PersistBatch reports duplicates, and the
// Redis steps are redone for them (confirm and release are idempotent).
//
// Status events are at least once: a redelivered batch publishes the
// current status again when it is created or failed, because the first attempt may have died
// before publishing. Event publishing failures are logged, not returned: the
// buyer also gets every non-final order when it (re)connects.
func (w *Worker) Handle(ctx context.Context, batch []seckill.Reservation) error {
	if len(batch) == 0 {
		return nil
	}
	start := time.Now()
	res, err := w.store.PersistBatch(ctx, batch, w.payTimeout)
	w.metrics.persisted(start)
	if err != nil {
		return fmt.Errorf("orders: worker: %w", err)
	}
	// Only this call's transitions count: a redelivered batch reports
	// duplicates, which entered their status before.
	w.metrics.entered(StatusCreated, res.Count(OutcomeCreated))
	w.metrics.entered(StatusFailed, res.Count(OutcomeFailed))

	var confirm []seckill.Reservation
	var release []Persisted
	var events []Order
	seen := make(map[int64]bool, len(res.Results))
	for _, p := range res.Results {
		if seen[p.Reservation.OrderID] {
			continue // the same message twice in one batch: one follow-up
		}
		seen[p.Reservation.OrderID] = true
		switch {
		case p.Outcome == OutcomeFailed:
			w.log.WarnContext(ctx, "reservation failed", "order_id", p.Reservation.OrderID,
				"voucher_id", p.Reservation.VoucherID, "user_id", p.Reservation.UserID, "reason", p.Reason)
			if w.failed != nil {
				w.failed(p.Reservation)
			}
			release = append(release, p)
		case p.Order.Status == StatusFailed:
			// A failure persisted before: its release may not have happened.
			if p.Order.ReleasePending {
				release = append(release, p)
			} else {
				events = append(events, p.Order)
			}
		case p.Outcome == OutcomeCreated:
			confirm = append(confirm, p.Reservation)
			events = append(events, p.Order)
		default:
			// A duplicate of an order that exists: confirming again is
			// harmless and covers a crash between commit and confirm.
			confirm = append(confirm, p.Reservation)
			if p.Order.Status == StatusCreated {
				events = append(events, p.Order)
			}
		}
	}

	if len(confirm) > 0 {
		if err := w.stock.Confirm(ctx, confirm); err != nil {
			return fmt.Errorf("orders: worker: confirm %d reservations: %w", len(confirm), err)
		}
	}
	if len(release) > 0 {
		released := make([]int64, 0, len(release))
		for _, p := range release {
			r := p.Reservation
			mode := seckill.ReleaseAny
			if errors.Is(p.Reason, seckill.ErrSoldOut) {
				// PostgreSQL had no unit for a hold Redis made: Redis
				// counted one unit too many (it lost acknowledged
				// writes, e.g. across a failover). Giving it back would
				// sell it again, to the next shopper refused.
				mode = seckill.ReleaseRefused
			}
			if _, err := w.stock.Release(ctx, r.VoucherID, r.OrderID, mode); err != nil {
				return fmt.Errorf("orders: worker: release order %d: %w", r.OrderID, err)
			}
			released = append(released, r.OrderID)
			o := p.Order
			o.ReleasePending = false
			events = append(events, o)
		}
		if err := w.store.ClearReleasePending(ctx, released); err != nil {
			return fmt.Errorf("orders: worker: %w", err)
		}
	}
	w.publish(ctx, events)
	return nil
}

// BatchEvents is an Events that can publish many events in one round trip
// (notify.Publisher implements it, with one message per shard channel the
// batch touches). The Worker uses it when it has it: a batch of a hundred
// orders is then one round trip, not a hundred.
type BatchEvents interface {
	PublishBatch(ctx context.Context, events []Event) error
}

func (w *Worker) publish(ctx context.Context, list []Order) {
	if w.events == nil || len(list) == 0 {
		return
	}
	at := w.now().UTC()
	if b, ok := w.events.(BatchEvents); ok {
		events := make([]Event, len(list))
		for i, o := range list {
			events[i] = Event{Order: o, At: at}
		}
		if err := b.PublishBatch(ctx, events); err != nil {
			w.log.WarnContext(ctx, "order events not published", "count", len(events), "err", err)
		}
		return
	}
	for _, o := range list {
		if err := w.events.Publish(ctx, Event{Order: o, At: at}); err != nil {
			w.log.WarnContext(ctx, "order event not published", "order_id", o.ID, "status", o.Status, "err", err)
		}
	}
}
