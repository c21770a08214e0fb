package edge_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

func TestUserLimitRetryAfterLetsTheNextOneThrough(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{UserRate: 2, UserBurst: 2})
	var sold atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))
	ctx := context.Background()
	alice, bob := rand.Int64N(1<<40)+1, rand.Int64N(1<<40)+1

	for range 2 {
		a := attempt(1, alice)
		_, err := buy(ctx, a)
		require.NoError(t, err)
		require.Equal(t, "2", a.Header("RateLimit-Limit"))
		require.Equal(t, "2", a.Header("X-RateLimit-Limit"))
	}
	a := attempt(1, alice)
	_, err := buy(ctx, a)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	wait := retryAfter(err)
	require.Greater(t, wait, time.Duration(0))
	require.LessOrEqual(t, wait, time.Second)
	require.Equal(t, "0", a.Header("RateLimit-Remaining"))
	require.NotEmpty(t, a.Header("X-RateLimit-Reset"))

	// Another shopper is not affected.
	_, err = buy(ctx, attempt(1, bob))
	require.NoError(t, err)

	// Honouring Retry-After lets the next one through.
	time.Sleep(wait)
	_, err = buy(ctx, attempt(1, alice))
	require.NoError(t, err)
	require.EqualValues(t, 4, sold.Load())
}

// The global limit holds across two instances sharing one Redis: each learns
// that there are two and enforces half, so together they let at most
// Burst + Rate·t through in t seconds, as one GCRA would.
func TestGlobalLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	const rate, burst = 40, 8
	cfg := edge.Config{GlobalRate: rate, GlobalBurst: burst}
	a, _ := newEdge(t, rdb, cfg)
	b, _ := newEdge(t, rdb, cfg)
	require.Equal(t, 2, b.Instances(), "the second instance counts both in Start")
	require.Eventually(t, func() bool { return a.Instances() == 2 }, 3*time.Second, 20*time.Millisecond,
		"the first instance learns of the second at its next heartbeat")

	var sold atomic.Int64
	buys := []buyFunc{
		chain(a.Steps(), seckill.Voucher{ID: 1}, accept(&sold)),
		chain(b.Steps(), seckill.Voucher{ID: 1}, accept(&sold)),
	}
	start := time.Now()
	limited := 0
	for i := range 600 {
		_, err := buys[i%2](context.Background(), attempt(1, int64(i+1)))
		if err != nil {
			require.ErrorIs(t, err, apperr.ErrRateLimited)
			require.Positive(t, retryAfter(err))
			// Each instance enforces half the rate, no less: its next
			// token is at most one half-rate interval away.
			require.LessOrEqual(t, retryAfter(err), 2*time.Second/rate+time.Millisecond)
			limited++
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	bound := burst + rate*elapsed
	t.Logf("%d allowed of 600 in %.2fs; GCRA bound %.0f", sold.Load(), elapsed, bound)
	// Only the upper bound is timed: a busy machine asks less often and
	// gets fewer, which proves nothing; the share is checked above by the
	// refusals' Retry-After.
	require.LessOrEqual(t, float64(sold.Load()), bound+1)
	require.Positive(t, limited)
}

// An instance alone takes the whole limit, Retry-After and headers included.
func TestGlobalLimitAloneGetsFullRate(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	const rate, burst = 40, 8
	e, reg := newEdge(t, rdb, edge.Config{GlobalRate: rate, GlobalBurst: burst})
	require.Equal(t, 1, e.Instances())
	var sold atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))

	// The burst at once, then a refusal that says when to come back. The
	// limit refills one token every 1/rate, and how many refill while the
	// burst is being asked depends on the machine's speed, so the refusal
	// is waited for and what came before it is bounded by the elapsed time.
	began := time.Now()
	var allowed int
	var a *pipe.Attempt
	var err error
	for {
		a = attempt(1, int64(allowed+1))
		if _, err = buy(context.Background(), a); err != nil {
			break
		}
		allowed++
	}
	require.GreaterOrEqual(t, allowed, burst, "the burst is given at once")
	require.LessOrEqual(t, float64(allowed), burst+rate*time.Since(began).Seconds()+1)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	wait := retryAfter(err)
	require.Greater(t, wait, time.Duration(0))
	require.LessOrEqual(t, wait, time.Second/rate+time.Millisecond)
	require.Equal(t, "40", a.Header("RateLimit-Limit"))
	require.Equal(t, "0", a.Header("X-RateLimit-Remaining"))
	require.Equal(t, 1.0, counterValue(t, reg, "seckill_gate_rejections_total"))
	time.Sleep(wait)
	_, err = buy(context.Background(), attempt(1, 101))
	require.NoError(t, err)

	// Then the full rate, not a share of it.
	sold.Store(0)
	start := time.Now()
	for i := range 600 {
		_, _ = buy(context.Background(), attempt(1, int64(i+200)))
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start).Seconds()
	t.Logf("%d allowed in %.2fs at %d/s", sold.Load(), elapsed, rate)
	require.LessOrEqual(t, float64(sold.Load()), rate*elapsed+2)
	// The full rate, not a share, is proved above without a clock: the
	// refusal's Retry-After is one full-rate interval, and a buy after
	// waiting it succeeds. A lower bound on what got through here would
	// only measure how busy the machine was (it failed on two shared
	// cores with 73 of an expected 81).
	require.Positive(t, sold.Load())
}

// An instance that stops heartbeating without leaving (a crash) drops out of
// the count within the stale window; one that stops cleanly at once.
func TestFleetForgetsSilentInstances(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	ctx := context.Background()
	key := "seckill:rl:instances:" + t.Name()
	cfg := edge.Config{FleetKey: key}
	a, reg := newEdge(t, rdb, cfg)
	require.Equal(t, 1, a.Instances())

	// A crashed instance: one heartbeat, then silence.
	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, rdb.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli()), Member: "crashed"}).Err())
	require.Eventually(t, func() bool { return a.Instances() == 2 }, 3*time.Second, 20*time.Millisecond)
	require.Equal(t, 2.0, counterValue(t, reg, "seckill_gateway_instances"))
	start := time.Now()
	require.Eventually(t, func() bool { return a.Instances() == 1 }, 6*time.Second, 20*time.Millisecond)
	t.Logf("a silent instance dropped out after %v (%v since its beat)", time.Since(start), time.Since(now))

	// A stopped instance leaves the set; the other counts it out at its
	// next beat, not after the stale window.
	b, _, stopB := newStoppableEdge(t, rdb, cfg)
	require.Equal(t, 2, b.Instances())
	require.Eventually(t, func() bool { return a.Instances() == 2 }, 3*time.Second, 20*time.Millisecond)
	stopB()
	start = time.Now()
	require.Eventually(t, func() bool { return a.Instances() == 1 }, 2*time.Second, 20*time.Millisecond)
	t.Logf("a stopped instance dropped out after %v", time.Since(start))
}

func TestCredentialLimitPerIP(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{CredentialLimit: redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Minute}})
	lim := e.Gates().Credentials
	ctx := context.Background()
	ip := "10.9." + itoa(rand.IntN(10)) + "." + itoa(rand.IntN(10)) + time.Now().Format(".150405.000")
	for range 3 {
		require.NoError(t, lim.Allow(ctx, ip))
	}
	err := lim.Allow(ctx, ip)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	require.Greater(t, retryAfter(err), time.Second)
	require.NoError(t, lim.Allow(ctx, ip+"-other"))
}

func itoa(n int) string { return string(rune('0' + n)) }

// gateCount is one series of the gates' counters (0 when absent: a
// counter vector has no series before its first increment).
func gateCount(t testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	return series(t, reg, name, labels...).GetCounter().GetValue()
}

// series is the series of family name with the given label pairs, or nil.
func series(t testing.TB, reg *prometheus.Registry, name string, labels ...string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// One account flooding the buy button spends its own per-user budget and
// nothing of the global one: the global limit sees only the attempts the
// per-user limit let through, so the shoppers after it all get through. The
// assertions are on counts, whatever the speed of the machine.
func TestFloodingAccountDoesNotSpendTheGlobalBudget(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	// The global budget is 20 at once and 20/s; the flooder may spend at
	// most its own 3 + 5/s of it, so 17 + 15/s stay for the others.
	e, reg := newEdge(t, rdb, edge.Config{GlobalRate: 20, GlobalBurst: 20, UserRate: 5, UserBurst: 3})
	var sold atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))
	ctx := context.Background()
	bot := rand.Int64N(1<<40) + 1
	const flood = 500
	refused := 0
	for range flood {
		a := attempt(1, bot)
		a.ClientKey = "6.6.6.6"
		if _, err := buy(ctx, a); err != nil {
			require.ErrorIs(t, err, apperr.ErrRateLimited)
			refused++
		}
	}
	require.Greater(t, refused, flood/2, "the flooder is held to its per-user rate")

	userPassed := gateCount(t, reg, "seckill_gate_allowed_total", "gate", "user_limit")
	globalSeen := gateCount(t, reg, "seckill_gate_allowed_total", "gate", "global_limit") +
		gateCount(t, reg, "seckill_gate_rejections_total", "gate", "global_limit", "reason", "rate_limited")
	require.Equal(t, userPassed, globalSeen, "the global limit is charged only by attempts the per-user limit admitted")
	require.Zero(t, gateCount(t, reg, "seckill_gate_rejections_total", "gate", "global_limit", "reason", "rate_limited"))

	for i := range 10 {
		a := attempt(1, bot+1+int64(i))
		a.ClientKey = "10.0.0." + itoa(i)
		_, err := buy(ctx, a)
		require.NoError(t, err, "shopper %d after the flood", i)
	}
}

// An address sending for many accounts spends its address's budget: what it
// sends past that budget reaches neither Redis (the per-user limit) nor the
// global limit, and other addresses keep theirs.
func TestAddressBudgetComesFirst(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, reg := newEdge(t, rdb, edge.Config{BuyAddressRate: 10, BuyAddressBurst: 10})
	var sold atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))
	ctx := context.Background()
	base := rand.Int64N(1<<40) + 1
	refused := 0
	for i := range 300 {
		a := attempt(1, base+int64(i)) // a new account every time
		a.ClientKey = "2001:db8:6:600::/56"
		if _, err := buy(ctx, a); err != nil {
			require.ErrorIs(t, err, apperr.ErrRateLimited)
			require.Positive(t, retryAfter(err))
			refused++
		}
	}
	require.Greater(t, refused, 150)
	addrPassed := gateCount(t, reg, "seckill_gate_allowed_total", "gate", "buy_address_limit")
	userSeen := gateCount(t, reg, "seckill_gate_allowed_total", "gate", "user_limit") +
		gateCount(t, reg, "seckill_gate_rejections_total", "gate", "user_limit", "reason", "rate_limited")
	require.Equal(t, addrPassed, userSeen, "only what the address limit admitted reaches the per-user limit")
	require.EqualValues(t, addrPassed, sold.Load())

	a := attempt(1, base+1000)
	a.ClientKey = "2001:db8:7:700::/56"
	_, err := buy(ctx, a)
	require.NoError(t, err, "another /56 has its own budget")
}

// Failed logins are counted per username, wherever they come from: each
// Take charges a unit, a Refund gives it back, so successes do not spend
// the budget.
func TestLoginNameLimit(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{LoginNameLimit: redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Minute}})
	names := e.Gates().LoginName
	ctx := context.Background()
	victim := "victim_" + strconv.FormatInt(rand.Int64N(1<<40), 36)
	require.NoError(t, names.Take(ctx, victim)) // a failure, never refunded
	for range 10 {
		require.NoError(t, names.Take(ctx, victim), "refunded takes cost nothing")
		names.Refund(ctx, victim)
	}
	for range 2 {
		require.NoError(t, names.Take(ctx, victim))
	}
	err := names.Take(ctx, victim)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	require.GreaterOrEqual(t, retryAfter(err), time.Second)
	require.ErrorIs(t, names.Take(ctx, strings.ToUpper(victim)), apperr.ErrRateLimited, "case does not make a new budget")
	require.NoError(t, names.Take(ctx, victim+"_other"))
}

// With UserLimitInStock the reservation judges a seckill buy's user limit
// exactly, so step 4 asks no Redis for it: it keeps this instance's copy in
// memory, which still refuses one account's flood (with its headers) before
// the global limit. A limit voucher keeps the Redis limit, and a seller's
// own rate-limit refusal is named the user limit's.
func TestUserLimitInStockAsksNoRedis(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{UserRate: 2, UserBurst: 2, UserLimitInStock: true})
	ctx := context.Background()
	alice := rand.Int64N(1<<40) + 1
	redisKey := "rate:seckill:rl:user:" + strconv.FormatInt(alice, 10)

	var sold atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1, Kind: seckill.KindSeckill}, accept(&sold))
	for range 2 {
		_, err := buy(ctx, attempt(1, alice))
		require.NoError(t, err)
	}
	a := attempt(1, alice)
	_, err := buy(ctx, a)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	require.Positive(t, retryAfter(err))
	require.Equal(t, "0", a.Header("RateLimit-Remaining"))
	require.Equal(t, pipe.StepUserLimit, a.Limiter)
	require.Zero(t, rdb.Exists(ctx, redisKey).Val(), "no Redis limit for a seckill voucher")

	_, err = chain(e.Steps(), seckill.Voucher{ID: 2, Kind: seckill.KindLimit}, accept(&sold))(ctx, attempt(2, alice))
	require.NoError(t, err)
	require.Equal(t, int64(1), rdb.Exists(ctx, redisKey).Val(), "the Redis limit for a limit voucher")

	limited := func(context.Context, *pipe.Attempt) (pipe.Sale, error) {
		return pipe.Sale{}, apperr.WithRetryAfter(apperr.ErrRateLimited, time.Second)
	}
	a = attempt(1, rand.Int64N(1<<40)+1)
	_, err = chain(e.Steps(), seckill.Voucher{ID: 1, Kind: seckill.KindSeckill}, limited)(ctx, a)
	require.ErrorIs(t, err, apperr.ErrRateLimited)
	require.Equal(t, pipe.StepUserLimit, a.Limiter, "the reservation's refusal is step 4's")
}
