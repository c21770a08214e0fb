package edge_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// One instance whose Redis goes away: after the threshold it answers 503
// fast without touching Redis, no request hangs, and once Redis is back it
// closes again by itself.
func TestBreakerOpensOnDeadRedisAndClosesByItself(t *testing.T) {
	t.Parallel()
	shared := stack.Redis(t)
	v := warm(t, shared, 1000)
	const openFor = 300 * time.Millisecond
	proxy := newSwitchProxy(t, shared.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr()})
	t.Cleanup(func() { _ = rdb.Close() })

	// The ops switch's poll and the fleet heartbeat also go through rdb; left
	// at their defaults they dial the dead proxy in the background, and on a
	// slow machine such a dial lands inside a refusal being counted below.
	e, reg := newEdge(t, rdb, edge.Config{BreakerFailures: 5, BreakerOpenFor: openFor, BreakerProbes: 2,
		ModePoll: time.Hour, FleetBeat: time.Hour})
	buy := chain(e.Steps(), v, buyWith(realBuyer(t, redisstock.New(redisstock.Config{Redis: rdb}))))
	ctx := context.Background()
	user := int64(1)
	try := func() error {
		user++
		_, err := buy(ctx, attempt(v.ID, user))
		return err
	}
	require.NoError(t, try())

	proxy.down()
	var failures int
	for e.Breaker.State() != "open" {
		start := time.Now()
		err := try()
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		require.Less(t, time.Since(start), 5*time.Second, "a request hung")
		failures++
		require.LessOrEqual(t, failures, 3)
	}
	// Each buy fails twice, at the per-user limit and at the reservation,
	// and both count: the fifth failure is the third buy's limit.
	require.Equal(t, 3, failures)

	// Open: 503 with Retry-After, without asking Redis. Only the half-open
	// probes (at most BreakerProbes per BreakerOpenFor) may dial it; how long
	// each refusal takes is logged, never asserted (it is the machine's).
	const n = 2000
	took := make([]time.Duration, n)
	var dialing int
	opened := time.Now()
	for i := range took {
		dials := proxy.dials.Load()
		start := time.Now()
		err := try()
		took[i] = time.Since(start)
		if proxy.dials.Load() != dials {
			dialing++
		}
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		require.GreaterOrEqual(t, retryAfter(err), time.Second)
		if e.Breaker.State() != "open" {
			took = took[:i+1]
			break
		}
	}
	windows := int(time.Since(opened)/openFor) + 1
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	t.Logf("503 with the breaker open: p50 %v, p99 %v, max %v over %d requests, %d of them dialed Redis", p50, p99, took[len(took)-1], len(took), dialing)
	require.LessOrEqual(t, dialing, 2*windows, "an open breaker asks Redis only through its probes")

	// Redis back: half-open lets probes through, they succeed, it closes.
	proxy.up.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := try()
		if err == nil && e.Breaker.State() == "closed" {
			break
		}
		require.True(t, time.Now().Before(deadline), "breaker did not close; state %s, last %v", e.Breaker.State(), err)
		time.Sleep(50 * time.Millisecond)
	}
	transitions := counterValue(t, reg, "seckill_breaker_transitions_total")
	require.GreaterOrEqual(t, transitions, 3.0) // closed→open→half-open→closed
}

// Shopper answers are successes for the breaker: a sold-out storm never opens it.
func TestBreakerIgnoresShopperAnswers(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 1)
	e, _ := newEdge(t, rdb, edge.Config{BreakerFailures: 2})
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	buy := chain(e.Steps(), v, buyWith(realBuyer(t, stock)))
	ctx := context.Background()
	_, err := buy(ctx, attempt(v.ID, 1))
	require.NoError(t, err)
	for u := range int64(20) {
		_, err := buy(ctx, attempt(v.ID, u+2))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
	}
	_, err = buy(ctx, attempt(v.ID+1, 1)) // no state in Redis: being restored
	require.ErrorIs(t, err, seckill.ErrStockMissing)
	require.Equal(t, "closed", e.Breaker.State())
}

// PUT open on one instance: every instance answers 503 within 1s, one
// started afterwards too; auto restores them all.
func TestOpsSwitchFleetWide(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	cfg := edge.Config{ModeKey: "seckill:breaker:mode:" + t.Name()}
	a, _ := newEdge(t, rdb, cfg)
	b, _ := newEdge(t, rdb, cfg)
	var sold atomic.Int64
	ctx := context.Background()
	buyOn := func(e *edge.Edge) error {
		_, err := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))(ctx, attempt(1, 1))
		return err
	}
	require.NoError(t, buyOn(a))
	require.NoError(t, buyOn(b))

	require.NoError(t, a.Breaker.SetMode(ctx, edge.ModeOpen))
	start := time.Now()
	require.ErrorIs(t, buyOn(a), apperr.ErrUnavailable)
	require.Eventually(t, func() bool { return buyOn(b) != nil }, time.Second, 10*time.Millisecond)
	t.Logf("second instance obeyed PUT open after %v", time.Since(start))
	err := buyOn(b)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.Positive(t, retryAfter(err))
	require.Equal(t, edge.StateForcedOpen, b.Breaker.State())
	require.Equal(t, edge.ModeOpen, b.Breaker.Mode())

	c, _ := newEdge(t, rdb, cfg) // started after the PUT
	require.ErrorIs(t, buyOn(c), apperr.ErrUnavailable)

	require.NoError(t, b.Breaker.SetMode(ctx, edge.ModeAuto))
	start = time.Now()
	require.Eventually(t, func() bool { return buyOn(a) == nil && buyOn(c) == nil }, time.Second, 10*time.Millisecond)
	t.Logf("instances obeyed PUT auto after %v", time.Since(start))
	require.Equal(t, "closed", a.Breaker.State())

	// closed never trips, whatever the failures.
	require.NoError(t, a.Breaker.SetMode(ctx, edge.ModeClosed))
	require.Eventually(t, func() bool { return c.Breaker.Mode() == edge.ModeClosed }, time.Second, 10*time.Millisecond)
	fail := func(context.Context, *pipe.Attempt) (pipe.Sale, error) {
		return pipe.Sale{}, errors.New("kafka down")
	}
	for range 20 {
		_, err := chain(c.Steps(), seckill.Voucher{ID: 1}, fail)(ctx, attempt(1, 1))
		require.NotErrorIs(t, err, apperr.ErrUnavailable)
	}
	require.Equal(t, edge.StateForcedClosed, c.Breaker.State())

	_, err = edge.ParseMode("half")
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
}

// An instance that cannot reach Redis keeps the last mode it read.
func TestOpsSwitchKeepsLastModeWithoutRedis(t *testing.T) {
	t.Parallel()
	shared := stack.Redis(t)
	proxy := newSwitchProxy(t, shared.Options().Addr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	cfg := edge.Config{ModeKey: "seckill:breaker:mode:" + t.Name()}
	require.NoError(t, shared.Set(context.Background(), cfg.ModeKey, "open", 0).Err())
	e, _ := newEdge(t, rdb, cfg)
	require.Equal(t, edge.ModeOpen, e.Breaker.Mode())
	proxy.down()
	time.Sleep(600 * time.Millisecond)
	require.Equal(t, edge.ModeOpen, e.Breaker.Mode())
	require.Error(t, e.Breaker.Refuse(edge.PathRedis))
}

// Contention on a common voucher's row (synchronous PostgreSQL buys failing)
// opens the PostgreSQL path's breaker only: flash-sale buys, which run on
// Redis, keep going, and the per-path state is reported. The ops switch
// still applies to both paths.
func TestBreakerPerPath(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, reg := newEdge(t, rdb, edge.Config{BreakerFailures: 3, BreakerOpenFor: time.Hour})
	ctx := context.Background()
	common := seckill.Voucher{ID: 11, Kind: seckill.KindCommon}
	flash := seckill.Voucher{ID: 12, Kind: seckill.KindSeckill}
	contended := func(context.Context, *pipe.Attempt) (pipe.Sale, error) {
		return pipe.Sale{}, fmt.Errorf("%w: deadlocked 4 times on the voucher's row", apperr.ErrUnavailable)
	}
	var sold atomic.Int64
	for u := range int64(3) {
		_, err := chain(e.Steps(), common, contended)(ctx, attempt(common.ID, u+1))
		require.ErrorIs(t, err, apperr.ErrUnavailable)
	}
	_, err := chain(e.Steps(), common, accept(&sold))(ctx, attempt(common.ID, 9))
	require.ErrorIs(t, err, apperr.ErrUnavailable, "the PostgreSQL path is open")
	require.Contains(t, err.Error(), "PostgreSQL")
	require.Zero(t, sold.Load())

	for u := range int64(20) {
		_, err := chain(e.Steps(), flash, accept(&sold))(ctx, attempt(flash.ID, u+100))
		require.NoError(t, err, "flash-sale buys never touch PostgreSQL and are not refused")
	}
	require.EqualValues(t, 20, sold.Load())
	require.NoError(t, e.Breaker.Refuse(edge.PathRedis), "the gates in front of the voucher step (Redis) are not refused either")
	require.Equal(t, map[string]string{edge.PathRedis: "closed", edge.PathPostgreSQL: "open"}, e.Breaker.Paths())
	require.Equal(t, "open", e.Breaker.State(), "the one-word state is the worst path's")
	require.Equal(t, 2.0, gaugeValue(t, reg, "seckill_breaker_state", "path", edge.PathPostgreSQL))
	require.Equal(t, 0.0, gaugeValue(t, reg, "seckill_breaker_state", "path", edge.PathRedis))

	// The operator's switch is for the whole sale: both paths.
	require.NoError(t, e.Breaker.SetMode(ctx, edge.ModeOpen))
	_, err = chain(e.Steps(), flash, accept(&sold))(ctx, attempt(flash.ID, 1000))
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.Equal(t, map[string]string{edge.PathRedis: edge.StateForcedOpen, edge.PathPostgreSQL: edge.StateForcedOpen}, e.Breaker.Paths())
	require.NoError(t, e.Breaker.SetMode(ctx, edge.ModeClosed))
	_, err = chain(e.Steps(), common, accept(&sold))(ctx, attempt(common.ID, 1001))
	require.NoError(t, err, "forced closed lets the open path's buys through")
}

// gaugeValue is one series of a gauge family.
func gaugeValue(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	m := series(t, reg, name, labels...)
	require.NotNil(t, m, "no %s%v", name, labels)
	return m.GetGauge().GetValue()
}

// The instance an operator switches obeys the new mode from the moment the
// switch returns: a poll of the mode that read Redis before the switch and
// finishes after it must not put the old mode back (it did, for up to one
// poll interval: the operator page showed "open" while the API said
// "auto"). The poll runs as often as it can to meet the switch.
func TestOpsSwitchIsNotUndoneByAnOlderPoll(t *testing.T) {
	t.Parallel()
	e, _ := newEdge(t, stack.Redis(t), edge.Config{ModePoll: time.Microsecond})
	ctx := context.Background()
	modes := []edge.Mode{edge.ModeOpen, edge.ModeAuto, edge.ModeClosed}
	for i := range 3000 {
		m := modes[i%len(modes)]
		require.NoError(t, e.Breaker.SetMode(ctx, m))
		require.Equal(t, m, e.Breaker.Mode(), "switch %d", i)
	}
}
