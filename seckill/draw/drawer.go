package draw

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Target is one draw a Drawer looks after.
type Target struct {
	Line waitroom.Line
	// Voucher is the voucher sold by the draw.
	Voucher seckill.Voucher
	// Stock is the units to draw (the stock left: before the draw nobody
	// can buy, as buying takes a pass), PerUserLimit what each winner may
	// buy.
	Stock, PerUserLimit int64
}

// DefaultDrawInterval is how often a Drawer looks at its draws: the
// entries open, and the draw is made, at most this long after the window
// opens and the beacon round is out.
const DefaultDrawInterval = 200 * time.Millisecond

// commitRetry is how long a drawer waits before it asks a beacon that did
// not answer again.
const commitRetry = 2 * time.Second

// Drawer commits each draw to a beacon round, opens its entries when its
// window opens, and makes it once begin_at has come and the round is out. Every gateway runs one:
// the draw is seated once however many race (Store.Draw).
type Drawer struct {
	draws    *Store
	targets  func(ctx context.Context) ([]Target, error)
	interval time.Duration
	log      *slog.Logger
	// drawn are the draws this drawer saw end: it leaves them alone.
	// committed have their beacon round committed; extended maps each
	// draw to the end its entries' expiry last followed.
	drawn, committed map[int64]bool
	extended         map[int64]time.Time
	metrics          *Metrics
	commitFailed     map[int64]time.Time
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
		log: cfg.Log.With("component", "draw"), drawn: map[int64]bool{}, committed: map[int64]bool{}, extended: map[int64]time.Time{}, commitFailed: map[int64]time.Time{},
		metrics: cfg.Metrics}
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

// Tick opens the draws whose window is open, keeps their entries as long
// as their sale (an end moved later moves them too), and makes those due.
// The window and begin_at are judged again by Redis's clock in the
// scripts; this instance's clock only saves calls that could not do
// anything.
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
		// The entries (each shopper's entry id) live as long as the sale,
		// drawn or not: an end moved later moves their expiry.
		if !d.extended[id].Equal(t.Line.EndAt) && !now.Add(time.Second).Before(t.Line.Opens()) {
			if err := d.draws.Extend(ctx, t.Line); err == nil {
				d.extended[id] = t.Line.EndAt
			}
		}
		if d.drawn[id] {
			continue
		}
		if !d.committed[id] {
			// A beacon that does not answer is asked again every few
			// seconds, not at every tick: its outage is logged, not
			// flooded.
			if now.Sub(d.commitFailed[id]) < commitRetry {
				continue
			}
			b, err := d.draws.CommitBeacon(ctx, t.Voucher)
			if err != nil {
				d.commitFailed[id] = now
				d.log.Warn("draw: cannot commit to a beacon round; entries open once it is committed", "voucher_id", id, "err", err)
				continue
			}
			delete(d.commitFailed, id)
			d.committed[id] = true
			d.log.Info("draw committed to a beacon round", "voucher_id", id, "chain_hash", b.ChainHash,
				"round", b.Round, "round_at", b.RoundAt)
		}
		if now.Add(time.Second).Before(t.Line.Opens()) {
			continue
		}
		if now.Before(t.Line.BeginAt) {
			if err := d.draws.Open(ctx, t.Line); err != nil && !errors.Is(err, ErrVoid) {
				d.log.Warn("draw: cannot open", "voucher_id", id, "err", err)
				d.metrics.outcome(OutcomeOpenFailed)
			}
			continue
		}
		out, err := d.draws.Draw(ctx, t.Line, t.Stock, t.PerUserLimit)
		if err != nil {
			if errors.Is(err, ErrVoid) {
				d.drawn[id] = true
				d.metrics.outcome(OutcomeVoid)
				continue
			}
			d.log.Warn("draw: cannot draw", "voucher_id", id, "err", err)
			d.metrics.outcome(OutcomeFailed)
			continue
		}
		if out.Done {
			d.drawn[id] = true
		}
		if out.Drew {
			d.metrics.drew(len(out.Draw.Ranked), int(out.Draw.Winners))
			cut, _ := out.Draw.Cutoff()
			d.log.Info("draw made", "voucher_id", id, "entries", len(out.Draw.Ranked),
				"winners", out.Draw.Winners, "round", out.Round.Number, "cutoff", cut.String())
		}
	}
	for id := range d.drawn {
		if !listed[id] {
			delete(d.drawn, id)
		}
	}
	for _, m := range []map[int64]time.Time{d.extended, d.commitFailed} {
		for id := range m {
			if !listed[id] {
				delete(m, id)
			}
		}
	}
	for id := range d.committed {
		if !listed[id] {
			delete(d.committed, id)
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
			out = append(out, Target{Line: line, Voucher: v, Stock: max(v.StockLeft, 0), PerUserLimit: v.PerUserLimit})
		}
		return out, nil
	}
}
