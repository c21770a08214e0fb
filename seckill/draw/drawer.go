package draw

import (
	"context"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Target is one draw a Drawer looks after.
type Target struct {
	Line waitroom.Line
	// Stock is the units to draw (the stock left: before the draw nobody
	// can buy, as buying takes a pass), PerUserLimit what each winner may
	// buy.
	Stock, PerUserLimit int64
}

// DefaultDrawInterval is how often a Drawer looks at its draws: the
// commitment is out, and the draw made, at most this long after the
// window opens and begin_at comes.
const DefaultDrawInterval = 200 * time.Millisecond

// Drawer opens each draw when its window opens (its seed, hence its
// commitment, is set) and makes it at begin_at. Every gateway runs one:
// the draw is seated once however many race (Store.Draw).
type Drawer struct {
	draws    *Store
	targets  func(ctx context.Context) ([]Target, error)
	interval time.Duration
	log      *slog.Logger
	// drawn are the draws this drawer saw made: it leaves them alone.
	drawn   map[int64]bool
	metrics *Metrics
}

// DrawerConfig is what NewDrawer builds a Drawer from; a zero field means
// its default.
type DrawerConfig struct {
	Draws *Store
	// Targets lists the draws, read again at every tick, from memory
	// (CatalogTargets).
	Targets func(ctx context.Context) ([]Target, error)
	// Interval is how often the draws are looked at (DefaultDrawInterval).
	Interval time.Duration
	// Log gets the failures (none: discarded).
	Log *slog.Logger
	// Metrics, when set, count the draws (NewMetrics).
	Metrics *Metrics
}

// NewDrawer returns a drawer of cfg.Targets. It starts nothing: Run does.
func NewDrawer(cfg DrawerConfig) *Drawer {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultDrawInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Drawer{draws: cfg.Draws, targets: cfg.Targets, interval: cfg.Interval,
		log: cfg.Log.With("component", "draw"), drawn: map[int64]bool{}, metrics: cfg.Metrics}
}

// Run ticks each interval until ctx ends, then returns nil: a failing draw
// is logged and tried again at the next tick.
func (d *Drawer) Run(ctx context.Context) error {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			d.Tick(ctx)
		}
	}
}

// Tick opens the draws whose window is open and makes those due. Both are
// judged again by Redis's clock in the scripts; this instance's clock only
// saves calls that could not do anything.
func (d *Drawer) Tick(ctx context.Context) {
	list, err := d.targets(ctx)
	if err != nil {
		d.log.Warn("draw: cannot list the draws", "err", err)
		return
	}
	now := time.Now()
	listed := make(map[int64]bool, len(list))
	for _, t := range list {
		id := t.Line.VoucherID
		listed[id] = true
		switch {
		case d.drawn[id] || now.Add(time.Second).Before(t.Line.Opens()):
		case now.Before(t.Line.BeginAt):
			if err := d.draws.Open(ctx, t.Line); err != nil {
				d.log.Warn("draw: cannot open", "voucher_id", id, "err", err)
				d.metrics.outcome(OutcomeOpenFailed)
			}
		default:
			out, err := d.draws.Draw(ctx, t.Line, t.Stock, t.PerUserLimit)
			if err != nil {
				d.log.Warn("draw: cannot draw", "voucher_id", id, "err", err)
				d.metrics.outcome(OutcomeFailed)
				d.drawn[id] = out.Due // a lost draw is not tried again
				continue
			}
			if out.Due {
				d.drawn[id] = true
			}
			if out.Drew {
				d.metrics.drew(len(out.Draw.Ranked), int(out.Draw.Winners))
				cut, _ := out.Draw.Cutoff()
				d.log.Info("draw made", "voucher_id", id, "entries", len(out.Draw.Ranked),
					"winners", out.Draw.Winners, "seed", out.Draw.Seed.String(), "cutoff", cut.String())
			}
		}
	}
	for id := range d.drawn {
		if !listed[id] {
			delete(d.drawn, id)
		}
	}
}

// CatalogTargets lists the draws from the catalog in memory: every voucher
// sold by draw, not paused and not ended.
func CatalogTargets(catalog *seckill.Catalog) func(ctx context.Context) ([]Target, error) {
	return func(ctx context.Context) ([]Target, error) {
		snap, err := catalog.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var out []Target
		for _, v := range snap.Vouchers() {
			line, ok := waitroom.LineOf(v)
			if !ok || !line.Draw || v.Paused || !now.Before(v.EndAt) {
				continue
			}
			out = append(out, Target{Line: line, Stock: max(v.StockLeft, 0), PerUserLimit: v.PerUserLimit})
		}
		return out, nil
	}
}
