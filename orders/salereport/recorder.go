package salereport

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/flashsale/seckill/orders"
)

// DefaultFlushInterval is how often a Recorder adds its counts to
// PostgreSQL: the report's resolution is a second, and one statement a
// second per process costs the database nothing.
const DefaultFlushInterval = time.Second

// maxPending bounds the figures a Recorder keeps while PostgreSQL does not
// take them: a sale second has a dozen figures, so this is hours of a busy
// sale; past it, new figures are dropped (and counted in the log).
const maxPending = 200_000

// flushTimeout bounds one flush, the last one at shutdown included.
const flushTimeout = 5 * time.Second

// key is one figure of one voucher in one second. name and detail are kept
// apart so that the hot path builds no string: the stored name is their
// concatenation.
type key struct {
	voucher int64
	second  int64
	name    string
	detail  string
}

// Recorder counts, in memory, what each voucher's sale does each second,
// and adds it to the Store in batches (Run). Its methods are safe for
// concurrent use and do no I/O.
type Recorder struct {
	store    Store
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	sums    map[key]int64
	gauges  map[key]int64
	dropped int64
}

// RecorderConfig is what NewRecorder builds a Recorder from.
type RecorderConfig struct {
	Store Store
	// Interval between flushes; DefaultFlushInterval when zero.
	Interval time.Duration
	// Log; slog.Default() when nil.
	Log *slog.Logger
}

// NewRecorder returns a Recorder; it starts nothing (Run does).
func NewRecorder(cfg RecorderConfig) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultFlushInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Recorder{store: cfg.Store, log: cfg.Log, interval: cfg.Interval, now: time.Now,
		sums: map[key]int64{}, gauges: map[key]int64{}}
}

// Attempt records one buy attempt of voucherID and its answer: code is the
// error code it was refused with ("" when accepted), limiter the limit's
// step when code is rate_limited.
func (r *Recorder) Attempt(voucherID int64, code, limiter string) {
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(key{voucherID, sec, figAttempts, ""}, 1)
	switch {
	case code == "":
		r.addLocked(key{voucherID, sec, figAccepted, ""}, 1)
	default:
		r.addLocked(key{voucherID, sec, prefixRefused, code}, 1)
		if limiter != "" {
			r.addLocked(key{voucherID, sec, prefixLimiter, limiter}, 1)
		}
	}
}

// Replayed records one buy attempt of voucherID answered with the order an
// earlier attempt's Idempotency-Key made: an attempt, but no new order, so
// it is counted apart from the accepted ones.
func (r *Recorder) Replayed(voucherID int64) {
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(key{voucherID, sec, figAttempts, ""}, 1)
	r.addLocked(key{voucherID, sec, figReplayed, ""}, 1)
}

// Step records one step of voucherID's waiting room: how many it admitted,
// and how many still wait after it. A step that changed nothing of an
// empty line records nothing, so an idle room leaves no rows.
func (r *Recorder) Step(voucherID int64, admitted, waiting int64) {
	if admitted == 0 && waiting == 0 {
		return
	}
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	if admitted > 0 {
		r.addLocked(key{voucherID, sec, figAdmitted, ""}, admitted)
	}
	k := key{voucherID, sec, figWaiting, ""}
	if old, ok := r.gauges[k]; ok {
		r.gauges[k] = max(old, waiting)
	} else if r.roomLocked() {
		r.gauges[k] = waiting
	}
}

// Returned records units of voucherID back on sale outside an order event
// (a reservation the workers recorded as failed).
func (r *Recorder) Returned(voucherID, units int64) { r.add(voucherID, figReturned, units) }

// add records n of a figure now.
func (r *Recorder) add(voucherID int64, name string, n int64) {
	sec := r.now().Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(key{voucherID, sec, name, ""}, n)
}

func (r *Recorder) addLocked(k key, n int64) {
	if _, ok := r.sums[k]; ok || r.roomLocked() {
		r.sums[k] += n
	}
}

// roomLocked reports whether a new figure fits, counting it as dropped
// when not.
func (r *Recorder) roomLocked() bool {
	if len(r.sums)+len(r.gauges) < maxPending {
		return true
	}
	r.dropped++
	return false
}

// Run adds the counts to the store every interval until ctx ends, then
// once more, and returns nil. A failed flush keeps its counts for the
// next one.
func (r *Recorder) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.Flush(context.WithoutCancel(ctx))
			return nil
		case <-t.C:
			r.Flush(ctx)
		}
	}
}

// Flush adds what was counted since the last flush to the store and
// reports whether it succeeded; on failure the counts are kept.
func (r *Recorder) Flush(ctx context.Context) bool {
	r.mu.Lock()
	sums, gauges, dropped := r.sums, r.gauges, r.dropped
	if len(sums) == 0 && len(gauges) == 0 && dropped == 0 {
		r.mu.Unlock()
		return true
	}
	r.sums, r.gauges, r.dropped = map[key]int64{}, map[key]int64{}, 0
	r.mu.Unlock()
	if dropped > 0 {
		r.log.WarnContext(ctx, "sale report: figures dropped while PostgreSQL did not take them", "dropped", dropped)
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	err := r.store.AddSaleCounts(ctx, counts(sums), counts(gauges))
	if err == nil {
		return true
	}
	r.log.WarnContext(ctx, "sale report: counts not written; kept for the next flush", "figures", len(sums)+len(gauges), "err", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, n := range sums {
		r.addLocked(k, n)
	}
	for k, n := range gauges {
		if old, ok := r.gauges[k]; ok {
			r.gauges[k] = max(old, n)
		} else if r.roomLocked() {
			r.gauges[k] = n
		}
	}
	return false
}

// counts lists m in key order: every process writes rows in the same
// order, so two flushes of the same seconds never deadlock each other.
func counts(m map[key]int64) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{VoucherID: k.voucher, Second: time.Unix(k.second, 0).UTC(), Name: k.name + k.detail, N: n})
	}
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.VoucherID, b.VoucherID), a.Second.Compare(b.Second), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Events returns next wrapped so that each published order transition is
// also recorded: a paid order counts a payment; a cancelled or failed one
// counts its units as returned, and a cancellation committed at or after
// the order's pay deadline a timeout (the order went unpaid in time, which
// the sweeper or, in the second before it, its shopper ended). Wrap only publishers that publish once per
// committed transition (orders.Metrics.CountEvents says which). next may
// be nil.
func (r *Recorder) Events(next orders.Events) orders.Events {
	return recordingEvents{r: r, next: next}
}

type recordingEvents struct {
	r    *Recorder
	next orders.Events
}

// Publish records the transition, then passes the event on.
func (e recordingEvents) Publish(ctx context.Context, ev orders.Event) error {
	o := ev.Order
	switch o.Status {
	case orders.StatusPaid:
		e.r.add(o.VoucherID, figPaid, 1)
	case orders.StatusCancelled:
		if !o.PayDeadline.IsZero() && !o.UpdatedAt.Before(o.PayDeadline) {
			e.r.add(o.VoucherID, figTimedOut, 1)
		}
		e.r.add(o.VoucherID, figReturned, o.Quantity)
	case orders.StatusFailed:
		e.r.add(o.VoucherID, figReturned, o.Quantity)
	}
	if e.next == nil {
		return nil
	}
	return e.next.Publish(ctx, ev)
}
