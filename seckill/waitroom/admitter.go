package waitroom

import (
	"context"
	"log/slog"
	"time"
)

// Target is one room the Admitter steps.
type Target struct {
	Line Line
	// Passes bounds the passes out at once: the stock left, so the room
	// never lets in more buyers than it could serve (-1: no bound). It must
	// be read when the targets are listed, after the Admitter's previous
	// step of the room (see Room.Admit, landed).
	Passes int64
	// Over is true once the sale cannot sell any more (ended, or every
	// unit paid for): the room closes, and everyone still waiting is told
	// so. A room merely sold out is not over: units may come back.
	Over bool
}

// DefaultAdmitInterval is how often an Admitter steps each room. Any
// interval admits the same number a second (the clock is in Redis); a short
// one spreads admissions evenly and lets the admitted know sooner.
const DefaultAdmitInterval = 200 * time.Millisecond

// Admitter runs the admission steps of every room with a line, and
// announces each step that moved a line to the fleet's feeds. Every gateway
// runs one: the steps share one clock in Redis (queue_admit.lua), so any
// number of admitters together admit each room's rate, not the rate times
// the instances, and the fleet keeps admitting while any instance is up.
type Admitter struct {
	room     *Room
	targets  func(ctx context.Context) ([]Target, error)
	interval time.Duration
	log      *slog.Logger
	onStep   func(voucherID int64, s Step)
	// closed are the rooms this admitter closed or saw closed: it
	// announces that once and steps them no more.
	closed map[int64]bool
	// landed is each room's Step.Landed at this admitter's last step of
	// it, which ended before the next listing of the targets read the
	// stock: the landed argument of the next step.
	landed map[int64]int64
	// metrics are the rooms' lines and admissions (nil: none).
	metrics *AdmitMetrics
	// stepped are the rooms this admitter has series of.
	stepped map[int64]bool
}

// AdmitterConfig is what NewAdmitter builds an Admitter from; a zero field
// means its default.
type AdmitterConfig struct {
	// Room is the rooms' Redis side.
	Room *Room
	// Targets lists the rooms to step, read again at every tick, from
	// memory (CatalogTargets: a catalog).
	Targets func(ctx context.Context) ([]Target, error)
	// Interval is how often each room is stepped (DefaultAdmitInterval).
	Interval time.Duration
	// Log gets the failures of a step (none: discarded).
	Log *slog.Logger
	// OnStep, when set, is told every step this admitter ran (the sale
	// report records the admissions and the line's length). It must not
	// block.
	OnStep func(voucherID int64, s Step)
	// Metrics, when set, get each room's line and admissions
	// (NewAdmitMetrics).
	Metrics *AdmitMetrics
}

// NewAdmitter returns an admitter of the rooms cfg.Targets lists. It starts
// nothing: Run does.
func NewAdmitter(cfg AdmitterConfig) *Admitter {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultAdmitInterval
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Admitter{room: cfg.Room, targets: cfg.Targets, interval: cfg.Interval, log: cfg.Log.With("component", "waitroom"),
		onStep: cfg.OnStep, closed: map[int64]bool{}, landed: map[int64]int64{}, metrics: cfg.Metrics, stepped: map[int64]bool{}}
}

// Admitting reports whether an Admitter steps l's room at now: it has an
// admission rate and its sale begins within a second. A targets function
// reads what only these rooms need (the stock left) for these alone.
func Admitting(l Line, now time.Time) bool {
	return l.AdmitPerSecond > 0 && !now.Add(time.Second).Before(l.BeginAt)
}

// Run steps every room each interval until ctx ends, then returns nil: a
// failing step is logged and tried again at the next tick.
func (a *Admitter) Run(ctx context.Context) error {
	every(ctx, a.interval, a.Tick)
	return nil
}

// every runs tick each interval until ctx ends.
func every(ctx context.Context, interval time.Duration, tick func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick(ctx)
		}
	}
}

// Tick runs one step of every room that is open: admit, or close a room
// whose sale is over. A failing room is logged and left for the next tick.
func (a *Admitter) Tick(ctx context.Context) {
	list, err := a.targets(ctx)
	if err != nil {
		a.log.Warn("waitroom: cannot list the rooms", "err", err)
		return
	}
	now := time.Now()
	listed := make(map[int64]bool, len(list))
	for _, t := range list {
		listed[t.Line.VoucherID] = true
		id := t.Line.VoucherID
		if a.closed[id] && !t.Over {
			// Stock added to a room closed when every unit was paid
			// for (Room.Reopen): step it again.
			delete(a.closed, id)
		}
		if a.closed[id] || !Admitting(t.Line, now) {
			continue
		}
		var step Step
		if t.Over {
			step, err = a.room.Close(ctx, t.Line)
		} else {
			step, err = a.room.Admit(ctx, t.Line, t.Passes, a.landed[id])
		}
		if err != nil {
			a.log.Warn("waitroom: admission step failed", "voucher_id", id, "err", err)
			continue
		}
		if a.onStep != nil {
			a.onStep(id, step)
		}
		a.metrics.step(id, step)
		a.stepped[id] = true
		a.landed[id] = step.Landed
		if step.Closed {
			a.closed[id] = true
		}
		if step.Admitted > 0 || step.Expired > 0 || step.Back > 0 || step.Requeued > 0 || step.Closed || step.SoldOutChanged {
			a.room.announceStep(ctx, t.Line, step)
		}
	}
	for id := range a.closed {
		if !listed[id] { // gone from the catalog: nothing to remember
			delete(a.closed, id)
		}
	}
	for id := range a.landed {
		if !listed[id] {
			delete(a.landed, id)
		}
	}
	for id := range a.stepped {
		if !listed[id] {
			a.metrics.forget(id)
			delete(a.stepped, id)
		}
	}
}
