package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Reasons of a heal, the values of seckill_heals_total's reason label.
const (
	// HealMissing: the voucher had no state in Redis (Redis restarted
	// without its data, was wiped, or a repair died half-way).
	HealMissing = "missing"
	// HealDrift: Redis disagreed with PostgreSQL beyond what is in flight,
	// on DriftChecks checks in a row.
	HealDrift = "drift"
)

// Defaults of HealerConfig.
const (
	DefaultHealEvery   = time.Second
	DefaultDriftEvery  = 5 * time.Second
	DefaultDriftChecks = 3
	DefaultHealLease   = 30 * time.Second
	DefaultHealTimeout = 2 * time.Minute
)

// HealerConfig is what NewHealer builds a Healer from; zero fields take
// defaults.
type HealerConfig struct {
	// Record is the truth a heal rebuilds Redis from.
	Record Record
	// Stock is what is healed.
	Stock Stock
	// Drain tells when every message produced before the heal is persisted.
	Drain Drain
	// Events, when set, is told of the holds a heal records as failed.
	Events Events
	// Every is how often the healer looks for vouchers missing in Redis (1 s);
	// a gateway's request wakes it at once.
	Every time.Duration
	// DriftEvery is how often it compares Redis with PostgreSQL (5 s), and
	// DriftChecks how many comparisons in a row must show the same voucher
	// drifting before it heals it (3): one comparison may catch a
	// cancellation between its PostgreSQL commit and its Redis release.
	DriftEvery  time.Duration
	DriftChecks int
	// Lease is the heal lock's lease (30 s), renewed every third of it: a
	// dead healer's lock expires within it.
	Lease time.Duration
	// Timeout bounds one heal (2 min); a heal that times out leaves the
	// voucher off sale for the next pass to try again.
	Timeout time.Duration
	// ProducerTimeout is the longest a gateway may still be writing a
	// reservation's message (see Repair).
	ProducerTimeout time.Duration
	// Grace is how long after a voucher's end its Redis state is kept: past
	// it the state expires on purpose and is not healed (default
	// seckill.DefaultStateGrace).
	Grace time.Duration
	// Room, when set, recovers a voucher's waiting room from its durable
	// copy before the heal puts the stock back on sale.
	Room    RoomRecovery
	Log     *slog.Logger
	Metrics *Metrics
}

// Healer rebuilds from PostgreSQL the Redis state of seckill vouchers that
// lost it, or whose Redis figures provably disagree with PostgreSQL, without
// an operator: it runs Repair (the voucher off sale meanwhile, buyers told
// 503 with a Retry-After) under a per-voucher lease, so that of many healers
// exactly one rebuilds a voucher at a time. It keeps nothing that matters in
// memory; any number may run.
type Healer struct {
	store  Record
	stock  Stock
	drain  Drain
	events Events
	cfg    HealerConfig
	now    func() time.Time

	mu      sync.Mutex
	healing map[int64]bool
	suspect map[int64]int
	wg      sync.WaitGroup
	slots   chan struct{}
}

// NewHealer returns a Healer.
func NewHealer(cfg HealerConfig) *Healer {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Every, DefaultHealEvery)
	def(&cfg.DriftEvery, DefaultDriftEvery)
	def(&cfg.Lease, DefaultHealLease)
	def(&cfg.Timeout, DefaultHealTimeout)
	def(&cfg.ProducerTimeout, DefaultProducerTimeout)
	def(&cfg.Grace, seckill.DefaultStateGrace)
	if cfg.DriftChecks <= 0 {
		cfg.DriftChecks = DefaultDriftChecks
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Healer{store: cfg.Record, stock: cfg.Stock, drain: cfg.Drain, events: cfg.Events, cfg: cfg, now: time.Now,
		healing: map[int64]bool{}, suspect: map[int64]int{}, slots: make(chan struct{}, 8)}
}

// Run heals until ctx ends, then waits for the heals under way and returns
// nil. Errors (Redis or PostgreSQL down) are logged and retried.
func (h *Healer) Run(ctx context.Context) error {
	defer h.wg.Wait()
	var lastDrift time.Time
	var failing bool
	for ctx.Err() == nil {
		if _, err := h.stock.HealRequests(ctx, h.cfg.Every); err != nil {
			if ctx.Err() != nil {
				break
			}
			if !failing {
				h.cfg.Log.WarnContext(ctx, "healer: cannot read heal requests; scanning on its own", "err", err)
			}
			failing = true
			if pause.For(ctx, h.cfg.Every) != nil {
				break
			}
		}
		drift := h.now().Sub(lastDrift) >= h.cfg.DriftEvery
		if drift {
			lastDrift = h.now()
		}
		if err := h.Pass(ctx, drift); err != nil && ctx.Err() == nil {
			if !failing {
				h.cfg.Log.WarnContext(ctx, "healer: pass failed; trying again", "err", err)
			}
			failing = true
			continue
		}
		failing = false
	}
	return nil
}

// Pass looks once at every seckill voucher whose state Redis should hold,
// and starts a heal (in the background) for each one missing there, and with
// drift set, for each one that drifted on DriftChecks passes in a row.
func (h *Healer) Pass(ctx context.Context, drift bool) error {
	ids, err := h.store.ActiveSeckillVoucherIDs(ctx, h.now().Add(-h.cfg.Grace))
	if err != nil {
		return fmt.Errorf("orders: heal: active vouchers: %w", err)
	}
	missing, err := h.stock.Missing(ctx, ids)
	if err != nil {
		return fmt.Errorf("orders: heal: %w", err)
	}
	gone := make(map[int64]bool, len(missing))
	for _, id := range missing {
		gone[id] = true
		h.start(ctx, id, HealMissing, "its Redis state is missing (Redis lost or wiped its data, or a repair stopped half-way)")
	}
	if !drift {
		return nil
	}
	stats := NewStatsService(StatsConfig{Record: h.store, Stock: h.stock})
	for _, id := range ids {
		if gone[id] || h.busy(id) {
			continue
		}
		st, err := stats.Stats(ctx, id)
		if err != nil {
			return fmt.Errorf("orders: heal: drift of voucher %d: %w", id, err)
		}
		h.mu.Lock()
		if st.Drift == nil || st.Drift.OK() {
			delete(h.suspect, id)
			h.mu.Unlock()
			continue
		}
		h.suspect[id]++
		n := h.suspect[id]
		h.mu.Unlock()
		why := "Redis disagrees with PostgreSQL beyond what is in flight: " + strings.Join(st.Drift.Problems, "; ")
		if n < h.cfg.DriftChecks {
			h.cfg.Log.InfoContext(ctx, "healer: voucher drifts; checking again before healing", "voucher_id", id,
				"check", n, "of", h.cfg.DriftChecks, "why", why)
			continue
		}
		h.start(ctx, id, HealDrift, why)
	}
	return nil
}

func (h *Healer) busy(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healing[id]
}

// start heals id in the background unless this healer is already at it.
func (h *Healer) start(ctx context.Context, id int64, reason, why string) {
	h.mu.Lock()
	if h.healing[id] {
		h.mu.Unlock()
		return
	}
	h.healing[id] = true
	delete(h.suspect, id)
	h.mu.Unlock()
	h.wg.Go(func() {
		defer func() {
			h.mu.Lock()
			delete(h.healing, id)
			h.mu.Unlock()
		}()
		select {
		case h.slots <- struct{}{}:
			defer func() { <-h.slots }()
		case <-ctx.Done():
			return
		}
		if err := h.Heal(ctx, id, reason, why); err != nil && ctx.Err() == nil {
			h.cfg.Metrics.healFailed(reason)
			h.cfg.Log.ErrorContext(ctx, "healer: heal failed; the voucher stays off sale (buyers get 503) and the next pass tries again",
				"voucher_id", id, "reason", reason, "err", err)
		}
	})
}

// errLeaseLost ends a heal whose lease could not be renewed.
var errLeaseLost = errors.New("the heal lease was lost (expired or wiped); another healer may take over")

// Heal rebuilds one voucher's Redis state from PostgreSQL (Repair) if its
// heal lease is free and the reason still holds once the lease is taken; it
// returns nil without doing anything otherwise.
func (h *Healer) Heal(ctx context.Context, id int64, reason, why string) error {
	lease, ok, err := h.stock.LockHeal(ctx, id, h.cfg.Lease)
	if err != nil {
		return err
	}
	if !ok {
		h.cfg.Log.DebugContext(ctx, "healer: another instance is healing this voucher", "voucher_id", id)
		return nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lease.Unlock(uctx)
	}()
	var stock Stock = fenced{Stock: h.stock, token: lease.Token()}
	if h.cfg.Room != nil {
		stock = WithRoomRecovery(stock, h.cfg.Room)
	}
	// Another healer may have finished just before this one took the lease.
	if still, err := h.stillNeeded(ctx, id, reason); err != nil || !still {
		return err
	}
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hctx, stop := context.WithTimeout(hctx, h.cfg.Timeout)
	defer stop()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		h.keep(hctx, lease, cancel)
	}()
	h.cfg.Log.WarnContext(ctx, "healer: taking the voucher off sale to rebuild it from PostgreSQL; buyers get 503 with Retry-After meanwhile",
		"voucher_id", id, "reason", reason, "why", why)
	start := h.now()
	res, err := Repair(hctx, id, h.store, stock, h.drain, h.cfg.ProducerTimeout)
	took := h.now().Sub(start)
	cancel(nil)
	<-renewed
	if err != nil {
		if cause := context.Cause(hctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = errors.Join(err, cause)
		}
		return fmt.Errorf("orders: heal voucher %d (off sale for %s so far): %w", id, took.Round(time.Millisecond), err)
	}
	h.cfg.Metrics.healed(reason, took)
	h.cfg.Log.WarnContext(ctx, "healer: voucher rebuilt from PostgreSQL and back on sale",
		"voucher_id", id, "reason", reason, "why", why,
		"holds", res.Holds, "held", res.Held, "released_orders", res.Released, "stock_left", res.Left,
		"orphaned_holds_failed", len(res.Failed), "off_sale_for", took.Round(time.Millisecond))
	if h.events != nil {
		for _, o := range res.Failed {
			if err := h.events.Publish(ctx, Event{Order: o, At: h.now().UTC()}); err != nil {
				h.cfg.Log.WarnContext(ctx, "order event not published", "order_id", o.ID, "err", err)
			}
		}
	}
	return nil
}

// stillNeeded checks the reason again under the lease.
func (h *Healer) stillNeeded(ctx context.Context, id int64, reason string) (bool, error) {
	if reason == HealMissing {
		m, err := h.stock.Missing(ctx, []int64{id})
		return len(m) == 1, err
	}
	st, err := NewStatsService(StatsConfig{Record: h.store, Stock: h.stock}).Stats(ctx, id)
	if err != nil {
		return false, err
	}
	return st.Drift != nil && !st.Drift.OK(), nil
}

// keep renews the lease every third of its ttl until ctx ends; when the
// lease is lost, or cannot be renewed for a whole ttl, it cancels the heal
// (whose fenced Rebuild would refuse to commit anyway).
func (h *Healer) keep(ctx context.Context, lease *redisstock.HealLock, cancel context.CancelCauseFunc) {
	t := time.NewTicker(h.cfg.Lease / 3)
	defer t.Stop()
	renewed := h.now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := lease.Renew(ctx)
		switch {
		case err == nil && ok:
			renewed = h.now()
		case err == nil && !ok, h.now().Sub(renewed) >= h.cfg.Lease:
			cancel(errLeaseLost)
			return
		}
	}
}
