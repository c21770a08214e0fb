package orders

import (
	"context"
	"log/slog"
	"time"
)

// Defaults of SweeperConfig.
const (
	DefaultSweepInterval = time.Second
	DefaultSweepBatch    = 500
)

// SweeperConfig is what NewSweeper builds a Sweeper from; zero fields take
// defaults.
type SweeperConfig struct {
	// Lifecycle cancels the expired orders and releases what is owed.
	Lifecycle *Lifecycle
	// Interval is the pause between sweeps that found nothing to do (1 s:
	// an expired order is cancelled within about a second of its deadline).
	Interval time.Duration
	// Batch is the most orders one transaction cancels (500).
	Batch int
	Log   *slog.Logger
	// Metrics counts the cancellations (seckill_sweeper_cancelled_total).
	Metrics *Metrics
	// Passes, when set, records each pass that met no error.
	Passes *Passes
	// Holds, when set, settles the card holds of draws each pass
	// (Holds.Settle).
	Holds *Holds
}

// Sweeper cancels unpaid orders past their pay_deadline and empties the
// release outbox. It keeps nothing in memory: everything it does is read
// from and committed to PostgreSQL, so it survives restarts, and any number
// of sweepers may run (the rows are claimed FOR UPDATE SKIP LOCKED).
type Sweeper struct {
	life     *Lifecycle
	interval time.Duration
	batch    int
	log      *slog.Logger
	metrics  *Metrics
	passes   *Passes
	holds    *Holds
}

// NewSweeper returns a Sweeper over cfg.Lifecycle.
func NewSweeper(cfg SweeperConfig) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultSweepInterval
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultSweepBatch
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Sweeper{life: cfg.Lifecycle, interval: cfg.Interval, batch: cfg.Batch, log: cfg.Log, metrics: cfg.Metrics, passes: cfg.Passes,
		holds: cfg.Holds}
}

// Run sweeps until ctx ends and returns nil then. A full batch is followed
// at once by the next one; errors (database or Redis down) are logged and
// retried at the next tick.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		full := s.Sweep(ctx)
		if full {
			if ctx.Err() != nil {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep runs one pass: one batch of expired orders (those with a pending
// payment after asking the provider), then one batch of the release outbox
// and one of the refunds owed, and the draws' card holds to release. It reports whether a batch was full (there may be more to do).
func (s *Sweeper) Sweep(ctx context.Context) (full bool) {
	list, err := s.life.CancelExpired(ctx, s.batch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep: cancel expired orders", "err", err)
		}
	} else if len(list) > 0 {
		s.metrics.sweptOrders(len(list))
		s.log.DebugContext(ctx, "sweep: cancelled expired orders", "count", len(list))
	}
	n, relErr := s.life.ReleaseOwed(ctx, s.batch)
	if relErr != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "sweep: release owed stock in redis", "released", n, "err", relErr)
	}
	refunds, refErr := s.life.RefundOwed(ctx, s.batch)
	if refErr != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "sweep: refunds owed not asked of the provider", "asked", refunds, "err", refErr)
	}
	var holdErr error
	if s.holds != nil {
		var settled int
		settled, holdErr = s.holds.Settle(ctx, time.Now(), s.batch)
		if holdErr != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sweep: draw holds not settled", "released", settled, "err", holdErr)
		}
	}
	if err == nil && relErr == nil && refErr == nil && holdErr == nil {
		s.passes.swept(time.Now())
	}
	return len(list) == s.batch || (relErr == nil && n == s.batch)
}
