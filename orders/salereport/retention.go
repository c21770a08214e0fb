package salereport

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of RetentionConfig.
const (
	// DefaultRetention keeps a month of per-second counts after a sale's
	// end: long enough to study the sale second by second, short enough
	// that sale_counts holds a few rows an hour for every sale long over.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultRollUpInterval is the pause between passes: counts only
	// become due a retention after a sale, so a pass now and then keeps up.
	DefaultRollUpInterval = 10 * time.Minute
)

// RollUpWidth is the seconds a rolled-up count covers: an hour, one of the
// report's bucket widths (bucketWidth), so a report draws it whole.
const RollUpWidth = 3600

// rollUpBatch bounds the per-second counts one transaction rolls up, so
// that the first pass over a long-kept table is many short transactions,
// not one that holds its rows for minutes.
const rollUpBatch = 10_000

// rollUpVouchers is how many vouchers a pass asks for at a time.
const rollUpVouchers = 100

// RetentionConfig is what NewRetention builds a Retention from; zero fields
// take defaults.
type RetentionConfig struct {
	Store Store
	// After is how long per-second counts are kept after a sale's end
	// (DefaultRetention); SECKILL_SALE_COUNTS_RETENTION.
	After time.Duration
	// Interval between passes (DefaultRollUpInterval).
	Interval time.Duration
	// Log; slog.Default() when nil.
	Log *slog.Logger
}

// Retention bounds sale_counts by the data: once a sale ended longer ago
// than RetentionConfig.After, its per-second counts older than that (those
// of attempts long after the end included) are summed into one count per
// figure and hour (RollUpWidth; a gauge keeps the hour's highest). The
// report's totals stay whole and its timeline draws hours; a sale long over
// costs a few rows an hour it had figures in, whatever came in after it.
// It keeps nothing in memory, and any number of sweepers may run it at
// once: a count is rolled up by whichever deletes it.
type Retention struct {
	store    Store
	after    time.Duration
	interval time.Duration
	log      *slog.Logger
}

// NewRetention returns a Retention; it starts nothing (Run does).
func NewRetention(cfg RetentionConfig) *Retention {
	if cfg.After <= 0 {
		cfg.After = DefaultRetention
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRollUpInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Retention{store: cfg.Store, after: cfg.After, interval: cfg.Interval, log: cfg.Log}
}

// Run makes a pass every interval until ctx ends, then returns nil. A
// failed pass is logged and tried again at the next one.
func (r *Retention) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if _, err := r.Pass(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "sale report: counts not rolled up; tried again at the next pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass rolls up every count due now and says how many per-second counts it
// rolled up.
func (r *Retention) Pass(ctx context.Context) (int64, error) {
	before := time.Now().Add(-r.after)
	gauges := []string{figWaiting}
	var total int64
	var vouchers int
	for {
		ids, err := r.store.SaleCountsToRollUp(ctx, before, rollUpVouchers)
		if err != nil {
			return total, err
		}
		var rolled int64
		for _, id := range ids {
			for {
				n, err := r.store.RollUpSaleCounts(ctx, id, before, RollUpWidth, gauges, rollUpBatch)
				if err != nil {
					return total, err
				}
				rolled += n
				if n < rollUpBatch {
					break
				}
			}
		}
		total += rolled
		vouchers += len(ids)
		// A list that rolled nothing up would be listed again: the next
		// pass takes it.
		if len(ids) < rollUpVouchers || rolled == 0 {
			break
		}
	}
	if total > 0 {
		r.log.InfoContext(ctx, "sale report: per-second counts rolled up to the hour", "counts", total, "vouchers", vouchers, "older_than", before)
	}
	return total, nil
}
