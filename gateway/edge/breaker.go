package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// ModeKey is the Redis key of the fleet-wide ops switch.
const ModeKey = "seckill:breaker:mode"

// Mode is the ops switch: who decides whether buys go through.
type Mode string

// The three modes.
const (
	// ModeAuto lets the breaker decide.
	ModeAuto Mode = "auto"
	// ModeOpen shuts the sale's door: every buy gets 503.
	ModeOpen Mode = "open"
	// ModeClosed never trips: every buy goes through.
	ModeClosed Mode = "closed"
)

// ParseMode checks a mode sent by an operator.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOpen, ModeClosed:
		return m, nil
	}
	return "", fmt.Errorf("%w: mode must be auto, open or closed", apperr.ErrInvalidInput)
}

// States reported by Breaker.State besides gobreaker's closed, half-open, open.
const (
	StateForcedOpen   = "forced-open"
	StateForcedClosed = "forced-closed"
)

// Paths of the breaker: the kinds of dependency a buy runs on, as each
// seller names its own (buy.Seller.Path). Each has a breaker of its own, so
// that one failing does not refuse buys that never touch it.
const (
	PathRedis      = buy.PathRedis
	PathPostgreSQL = buy.PathPostgreSQL
)

// Breaker is this instance's circuit breakers around the buys, one per
// dependency path (PathRedis, PathPostgreSQL), obeying the ops switch. It
// implements buy.Breaker.
//
// One breaker for every buy let contention on one common voucher's row
// (synchronous PostgreSQL buys timing out behind its lock) open the door of
// the flash sale, whose buys never touch PostgreSQL. Each path now counts
// its own failures and opens on its own; the ops switch, an operator's
// decision about the whole sale, still applies to every path.
//
// gobreaker's own distributed breaker takes a Redis lock on every call, far
// too slow for this path: each instance breaks on its own failures, and only
// the operator's mode is shared, through one Redis key every instance polls.
type Breaker struct {
	redis, pg *pathBreaker
	rdb       redis.UniversalClient
	key       string
	mode      atomic.Pointer[Mode]
	// switchMu orders the mode's writers: an operator's switch bumps
	// switches, and a poll applies what it read only if no switch came
	// since its read began, so an older read never undoes a newer switch.
	switchMu sync.Mutex
	switches uint64
	openFor  time.Duration
	timeout  time.Duration
	every    time.Duration
	m        *metrics
	log      *slog.Logger
}

// pathBreaker is the breaker of one path.
type pathBreaker struct {
	name     string
	why      string // the refusal's reason, for the shopper and the log
	cb       *gobreaker.CircuitBreaker[buy.Purchase]
	openedAt atomic.Int64 // unix nanoseconds of the last transition to open
}

func newBreaker(rdb redis.UniversalClient, cfg Config, m *metrics, log *slog.Logger) *Breaker {
	b := &Breaker{rdb: rdb, key: cfg.ModeKey, openFor: cfg.BreakerOpenFor, timeout: cfg.CallTimeout, every: cfg.ModePoll, m: m, log: log}
	auto := ModeAuto
	b.mode.Store(&auto)
	b.redis = b.newPath(PathRedis, "open after repeated Redis or Kafka failures", cfg)
	b.pg = b.newPath(PathPostgreSQL, "open after repeated PostgreSQL failures of limit and common vouchers", cfg)
	return b
}

func (b *Breaker) newPath(name, why string, cfg Config) *pathBreaker {
	p := &pathBreaker{name: name, why: why}
	threshold := cfg.BreakerFailures
	p.cb = gobreaker.NewCircuitBreaker[buy.Purchase](gobreaker.Settings{
		Name:        name,
		MaxRequests: cfg.BreakerProbes,
		Timeout:     cfg.BreakerOpenFor,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		// A shopper's answer is the dependency working; only its failures count.
		IsSuccessful: func(err error) bool { return !isDependencyFailure(err) },
		// A shopper who hung up says nothing about the dependency.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				p.openedAt.Store(time.Now().UnixNano())
			}
			b.m.transitions.WithLabelValues(name, from.String(), to.String()).Inc()
			// Called under the breaker's lock: asking cb.State() here deadlocks.
			if *b.mode.Load() == ModeAuto {
				b.m.state.WithLabelValues(name).Set(stateValue(to))
			}
			b.log.Warn("circuit breaker", "path", name, "from", from.String(), "to", to.String())
		},
	})
	b.m.state.WithLabelValues(name).Set(0)
	return p
}

// path is the breaker of a path's name; an unknown name is the Redis path.
func (b *Breaker) path(name string) *pathBreaker {
	if name == PathPostgreSQL {
		return b.pg
	}
	return b.redis
}

// isDependencyFailure reports whether err means Redis, Kafka or the code
// behind failed, as opposed to a shopper's answer (sold out, limit, not
// started, ended, not found, invalid...), which is a success for the breaker.
func isDependencyFailure(err error) bool {
	if err == nil {
		return false
	}
	for _, answer := range []error{
		seckill.ErrSoldOut, seckill.ErrLimitExceeded, seckill.ErrNotStarted, seckill.ErrEnded,
		apperr.ErrNotFound, apperr.ErrInvalidInput, apperr.ErrConflict, apperr.ErrCaptchaInvalid,
		apperr.ErrRateLimited, apperr.ErrUnauthenticated, apperr.ErrForbidden, apperr.ErrTooLarge,
		seckill.ErrNotAdmitted,
		// One voucher's Redis state being restored by the healers: the path
		// works for every other voucher, so the breaker must not open.
		seckill.ErrStockMissing,
	} {
		if errors.Is(err, answer) {
			return false
		}
	}
	return true
}

// Run implements buy.Breaker: call runs behind the breaker of pathName.
func (b *Breaker) Run(ctx context.Context, pathName string, call func(context.Context) (buy.Purchase, error)) (buy.Purchase, error) {
	switch *b.mode.Load() {
	case ModeOpen:
		b.m.reject(gateBreaker, "forced_open")
		return buy.Purchase{}, b.refusal("forced open by the operator: the sale is paused", b.every)
	case ModeClosed:
		b.m.allow(gateBreaker)
		return call(ctx)
	}
	path := b.path(pathName)
	p, err := path.cb.Execute(func() (buy.Purchase, error) {
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return call(cctx)
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		b.m.reject(gateBreaker, "open_"+path.name)
		return buy.Purchase{}, b.refusal(path.why, b.untilHalfOpen(path))
	}
	b.m.allow(gateBreaker)
	return p, err
}

// failed counts err, a failure of pathName's dependency met in front of the
// breaker (the per-user limit's Redis call), as a failed call of that path,
// as Run would count it. Only the breaker decides in ModeAuto, and a shopper
// who hung up says nothing about the dependency.
func (b *Breaker) failed(pathName string, err error) {
	if *b.mode.Load() != ModeAuto || !isDependencyFailure(err) || errors.Is(err, context.Canceled) {
		return
	}
	_, _ = b.path(pathName).cb.Execute(func() (buy.Purchase, error) { return buy.Purchase{}, err })
}

// Refuse returns the 503 the breaker of pathName would give an attempt
// right now without running anything, or nil when it would let it try: the
// breaker's half of the buy's fast refusal.
func (b *Breaker) Refuse(pathName string) error {
	switch *b.mode.Load() {
	case ModeOpen:
		return b.refusal("forced open by the operator: the sale is paused", b.every)
	case ModeClosed:
		return nil
	}
	if path := b.path(pathName); path.cb.State() == gobreaker.StateOpen {
		return b.refusal(path.why, b.untilHalfOpen(path))
	}
	return nil
}

func (b *Breaker) refusal(why string, retry time.Duration) error {
	return apperr.WithRetryAfter(fmt.Errorf("%w: circuit breaker %s", apperr.ErrUnavailable, why), retry)
}

// untilHalfOpen is when the open breaker of path lets probes through.
func (b *Breaker) untilHalfOpen(path *pathBreaker) time.Duration {
	d := time.Until(time.Unix(0, path.openedAt.Load()).Add(b.openFor))
	return max(d, time.Second)
}

// Mode returns the ops switch as this instance last read it.
func (b *Breaker) Mode() Mode { return *b.mode.Load() }

// State is what this instance's breakers are doing as one word: forced-open
// or forced-closed when the ops switch overrides them, else the worst path's
// state (open, then half-open, then closed). Paths has each path's.
func (b *Breaker) State() string {
	switch *b.mode.Load() {
	case ModeOpen:
		return StateForcedOpen
	case ModeClosed:
		return StateForcedClosed
	}
	worst := gobreaker.StateClosed
	for _, p := range []*pathBreaker{b.redis, b.pg} {
		switch st := p.cb.State(); {
		case st == gobreaker.StateOpen:
			worst = st
		case st == gobreaker.StateHalfOpen && worst == gobreaker.StateClosed:
			worst = st
		}
	}
	return worst.String()
}

// Paths is each path's state (PathRedis, PathPostgreSQL), as State says it
// for one path: forced-open or forced-closed under the ops switch.
func (b *Breaker) Paths() map[string]string {
	out := make(map[string]string, 2)
	for _, p := range []*pathBreaker{b.redis, b.pg} {
		switch *b.mode.Load() {
		case ModeOpen:
			out[p.name] = StateForcedOpen
		case ModeClosed:
			out[p.name] = StateForcedClosed
		default:
			out[p.name] = p.cb.State().String()
		}
	}
	return out
}

// SetMode stores the ops switch for the whole fleet and obeys it here at
// once; the other instances read it within one poll interval.
func (b *Breaker) SetMode(ctx context.Context, m Mode) error {
	if _, err := ParseMode(string(m)); err != nil {
		return err
	}
	if err := b.rdb.Set(ctx, b.key, string(m), 0).Err(); err != nil {
		return fmt.Errorf("%w: redis set breaker mode: %w", apperr.ErrUnavailable, err)
	}
	b.switchMu.Lock()
	defer b.switchMu.Unlock()
	b.switches++
	b.apply(m)
	return nil
}

// applyRead applies a mode a poll read, unless an operator's switch on this
// instance came after the read began (seen, the count of switches then).
func (b *Breaker) applyRead(m Mode, seen uint64) {
	b.switchMu.Lock()
	defer b.switchMu.Unlock()
	if b.switches == seen {
		b.apply(m)
	}
}

func (b *Breaker) apply(m Mode) {
	if old := b.mode.Swap(&m); *old != m {
		b.log.Warn("breaker mode", "from", string(*old), "to", string(m))
	}
	b.setGauge()
}

func (b *Breaker) setGauge() {
	for _, p := range []*pathBreaker{b.redis, b.pg} {
		g := b.m.state.WithLabelValues(p.name)
		switch *b.mode.Load() {
		case ModeOpen:
			g.Set(2)
		case ModeClosed:
			g.Set(0)
		default:
			g.Set(stateValue(p.cb.State()))
		}
	}
}

// refresh reads the ops switch once. An unreachable Redis keeps the last
// known mode: the door stays as the operator left it.
func (b *Breaker) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(b.every, 200*time.Millisecond))
	defer cancel()
	b.switchMu.Lock()
	seen := b.switches
	b.switchMu.Unlock()
	s, err := b.rdb.Get(ctx, b.key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		b.applyRead(ModeAuto, seen)
	case err != nil:
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			b.log.Debug("breaker mode not read; keeping the last one", "err", err)
		}
	default:
		m, err := ParseMode(s)
		if err != nil {
			b.log.Error("breaker mode in Redis is not auto, open or closed; keeping the last one", "value", s)
			return
		}
		b.applyRead(m, seen)
	}
}

// poll refreshes the mode until ctx ends. Reading the state also moves an
// open breaker to half-open on time, so the gauge does not lag.
func (b *Breaker) poll(ctx context.Context) {
	every(ctx, b.every, b.refresh)
}

// Status returns the mode and the state as strings, for the admin route
// (gateway.BreakerAdmin); Paths has each path's state.
func (b *Breaker) Status() (mode, state string) { return string(b.Mode()), b.State() }

// Switch parses and sets the mode for the fleet (gateway.BreakerAdmin).
func (b *Breaker) Switch(ctx context.Context, mode string) error {
	m, err := ParseMode(mode)
	if err != nil {
		return err
	}
	return b.SetMode(ctx, m)
}
