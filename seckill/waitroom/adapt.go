package waitroom

// Admission that follows the back end's health (a room with
// seckill.Adaptive): the rate in force, one per room for the whole fleet,
// in Redis (lua/queue_rate.lua):
//
//	waitroom:{v42}:rate  hash  rate, base, changed, trouble, v
//
// Every gateway runs an Adapter: it reads the fleet's health, judges it with
// Rule.Next and writes the room's next state if no other instance wrote
// since it read, so the fleet moves the rate as one controller would; each
// then admits (and estimates the wait) at the rate in force it read.

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
)

// DefaultAdaptEvery is how often an Adapter reads the rates in force and
// judges the fleet's health: twice a second, so every gateway obeys a
// change within a second.
const DefaultAdaptEvery = 500 * time.Millisecond

// MetricAdmitRate is the gauge of the admission rate in force of each room
// being admitted, by voucher.
const MetricAdmitRate = "seckill_room_admit_rate"

// Adapter keeps the admission rate of adaptive rooms in step with the back
// end's health, and knows the rate in force of every room (Line). Every
// gateway runs one.
type Adapter struct {
	rdb      redis.UniversalClient
	script   *redis.Script
	vouchers func(ctx context.Context) ([]seckill.Voucher, error)
	health   func(ctx context.Context) (Health, error)
	rule     Rule
	every    time.Duration
	grace    time.Duration
	log      *slog.Logger
	gauge    *prometheus.GaugeVec

	// rates is the rate in force of each adaptive room being admitted,
	// replaced (never changed) by each tick.
	rates atomic.Pointer[map[int64]int64]
	// shown are the rooms with a gauge series, so a room gone loses it.
	mu    sync.Mutex
	shown map[int64]bool
}

// AdapterConfig is what NewAdapter builds an Adapter from; a zero field
// means its default.
type AdapterConfig struct {
	// Redis holds the rates in force.
	Redis redis.UniversalClient
	// Vouchers lists the vouchers, read again at every tick, from memory
	// (CatalogVouchers).
	Vouchers func(ctx context.Context) ([]seckill.Voucher, error)
	// Health is the fleet's health, read at every tick that has an
	// adaptive room to judge (none: UnknownHealth, the rate holds).
	Health func(ctx context.Context) (Health, error)
	// Rule is the control rule (DefaultRule).
	Rule Rule
	// Every is how often the rates are read and judged
	// (DefaultAdaptEvery).
	Every time.Duration
	// Grace is how long after the sale's end a room's rate lives
	// (seckill.DefaultStateGrace).
	Grace time.Duration
	// Registerer gets seckill_room_admit_rate (none: no metric).
	Registerer prometheus.Registerer
	// Log gets the failures of a tick (none: discarded).
	Log *slog.Logger
}

// NewAdapter returns the adapter of cfg. It starts nothing: Run does.
func NewAdapter(cfg AdapterConfig) (*Adapter, error) {
	if cfg.Every <= 0 {
		cfg.Every = DefaultAdaptEvery
	}
	if cfg.Grace <= 0 {
		cfg.Grace = seckill.DefaultStateGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Health == nil {
		cfg.Health = func(context.Context) (Health, error) { return UnknownHealth, nil }
	}
	a := &Adapter{rdb: cfg.Redis, script: redis.NewScript(lua.QueueRate), vouchers: cfg.Vouchers, health: cfg.Health,
		rule: cfg.Rule.withDefaults(), every: cfg.Every, grace: cfg.Grace, log: cfg.Log.With("component", "waitroom"),
		shown: map[int64]bool{}}
	empty := map[int64]int64{}
	a.rates.Store(&empty)
	if cfg.Registerer != nil {
		a.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricAdmitRate,
			Help: "The admission rate in force of each waiting room being admitted, shoppers a second: admit_per_second, or an adaptive room's current rate.",
		}, []string{"voucher_id"})
		if err := cfg.Registerer.Register(a.gauge); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// CatalogVouchers lists the vouchers of catalog, from memory.
func CatalogVouchers(catalog *seckill.Catalog) func(ctx context.Context) ([]seckill.Voucher, error) {
	return func(ctx context.Context) ([]seckill.Voucher, error) {
		snap, err := catalog.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		return snap.Vouchers(), nil
	}
}

// Run reads and judges the rates each interval until ctx ends, then
// returns nil: a failing tick is logged and tried again at the next.
func (a *Adapter) Run(ctx context.Context) error {
	every(ctx, a.every, a.Tick)
	return nil
}

// Line is l at the rate in force: an adaptive room's current rate once its
// admission began, else l as it is. A nil Adapter leaves l as it is.
func (a *Adapter) Line(l Line) Line {
	if a == nil {
		return l
	}
	if r, ok := (*a.rates.Load())[l.VoucherID]; ok && r > 0 {
		l.AdmitPerSecond = r
	}
	return l
}

// Targets is next with every target's line at the rate in force: the
// admission steps admit at it, and announce it to the feeds, whose
// estimated waits use it.
func (a *Adapter) Targets(next func(ctx context.Context) ([]Target, error)) func(ctx context.Context) ([]Target, error) {
	return func(ctx context.Context) ([]Target, error) {
		list, err := next(ctx)
		for i := range list {
			list[i].Line = a.Line(list[i].Line)
		}
		return list, err
	}
}

// Tick reads the rate in force of every room being admitted and, for an
// adaptive one, moves it as Rule.Next judges the fleet's health. A room
// that fails is logged and keeps the rate last read.
func (a *Adapter) Tick(ctx context.Context) {
	vs, err := a.vouchers(ctx)
	if err != nil {
		a.log.Warn("waitroom: cannot list the rooms to adapt", "err", err)
		return
	}
	now := time.Now()
	old := *a.rates.Load()
	rates := map[int64]int64{}
	shown := map[int64]int64{}
	health, judged := UnknownHealth, false
	for _, v := range vs {
		l, ok := LineOf(v)
		if !ok || !now.Before(v.EndAt) || !Admitting(l, now) {
			continue
		}
		shown[v.ID] = l.AdmitPerSecond
		ad := v.WaitingRoom.Adaptive
		if ad == nil {
			continue
		}
		if r, ok := old[v.ID]; ok {
			rates[v.ID], shown[v.ID] = r, r
		}
		if v.Paused {
			// The admitters skip it; its rate waits with it.
			continue
		}
		if !judged {
			if health, err = a.health(ctx); err != nil {
				a.log.Warn("waitroom: cannot read the fleet's health; adaptive rates hold", "err", err)
				health = UnknownHealth
			}
			judged = true
		}
		st, err := a.adapt(ctx, l, *ad, health)
		if err != nil {
			a.log.Warn("waitroom: adaptive rate", "voucher_id", v.ID, "err", err)
			continue
		}
		rates[v.ID], shown[v.ID] = st.Rate, st.Rate
	}
	a.rates.Store(&rates)
	a.show(shown)
}

// adapt reads l's state, and writes the next one Rule.Next makes of health
// unless another instance wrote since the read. It returns the state in
// force: the one written, else the one read (the next tick reads the other
// instance's).
func (a *Adapter) adapt(ctx context.Context, l Line, ad seckill.Adaptive, health Health) (RateState, error) {
	st, version, now, err := a.read(ctx, l.VoucherID)
	if err != nil {
		return RateState{}, err
	}
	next := a.rule.Next(st, health, ad, l.AdmitPerSecond, now)
	if next.same(st) {
		return st, nil
	}
	key := keysOf(l.VoucherID).rate
	written, err := a.script.Run(ctx, a.rdb, []string{key}, "write", version, next.Rate, next.Base,
		next.Changed.UnixMilli(), next.Trouble.UnixMilli(), l.EndAt.Add(a.grace).UnixMilli()).Int64()
	if err != nil {
		return RateState{}, unavailable("write the rate", err)
	}
	if written == 1 {
		if next.Rate != st.Rate {
			a.log.Info("waitroom: adaptive rate changed", "voucher_id", l.VoucherID, "from", st.Rate, "to", next.Rate,
				"buy_p99_ms", health.BuyP99.Milliseconds(), "lag", health.Lag, "breaker", health.Breaker,
				"buys", health.Buys, "failed", health.Failed)
		}
		return next, nil
	}
	if st.Rate <= 0 { // nobody has started it yet but another instance
		st.Rate = min(max(l.AdmitPerSecond, ad.MinPerSecond), ad.MaxPerSecond)
	}
	return st, nil
}

// read is voucherID's rate state, its version and Redis's time.
func (a *Adapter) read(ctx context.Context, voucherID int64) (RateState, int64, time.Time, error) {
	res, err := a.script.Run(ctx, a.rdb, []string{keysOf(voucherID).rate}, "read").Int64Slice()
	if err != nil {
		return RateState{}, 0, time.Time{}, unavailable("read the rate", err)
	}
	if len(res) != 6 {
		return RateState{}, 0, time.Time{}, fmt.Errorf("waitroom: queue_rate.lua answered %v", res)
	}
	return RateState{Rate: res[0], Base: res[1], Changed: time.UnixMilli(res[2]), Trouble: time.UnixMilli(res[3])},
		res[4], time.UnixMilli(res[5]), nil
}

// RateInForce is voucherID's adaptive rate state as the fleet shares it
// (zero for a room whose admission has not begun or that is not adaptive).
func (a *Adapter) RateInForce(ctx context.Context, voucherID int64) (RateState, error) {
	st, _, _, err := a.read(ctx, voucherID)
	return st, err
}

// show sets the gauge of every room in rates and drops the series of rooms
// no longer admitted.
func (a *Adapter) show(rates map[int64]int64) {
	if a.gauge == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, r := range rates {
		a.gauge.WithLabelValues(strconv.FormatInt(id, 10)).Set(float64(r))
		a.shown[id] = true
	}
	for id := range a.shown {
		if _, ok := rates[id]; !ok {
			a.gauge.DeleteLabelValues(strconv.FormatInt(id, 10))
			delete(a.shown, id)
		}
	}
}
