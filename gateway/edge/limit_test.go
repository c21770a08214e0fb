package edge_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
)

func TestUserLimitRetryAfterLetsTheNextOneThrough(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{UserRate: 2, UserBurst: 2})
	var sold atomic.Int64
	buy := chain(e.Gates(), seckill.Voucher{ID: 1}, accept(&sold))
	ctx := context.Background()
	alice, bob := rand.Int64N(1<<40)+1, rand.Int64N(1<<40)+1

	for range 2 {
		a := attempt(1, alice)
		_, err := buy(ctx, a)
		require.NoError(t, err)
		require.Equal(t, "2", a.Header().Get("RateLimit-Limit"))
		require.Equal(t, "2", a.Header().Get("X-RateLimit-Limit"))
	}
	a := attempt(1, alice)
	_, err := buy(ctx, a)
	require.ErrorIs(t, err, seckill.ErrRateLimited)
	wait := retryAfter(err)
	require.Greater(t, wait, time.Duration(0))
	require.LessOrEqual(t, wait, time.Second)
	require.Equal(t, "0", a.Header().Get("RateLimit-Remaining"))
	require.NotEmpty(t, a.Header().Get("X-RateLimit-Reset"))

	// Another shopper is not affected.
	_, err = buy(ctx, attempt(1, bob))
	require.NoError(t, err)

	// Honouring Retry-After lets the next one through.
	time.Sleep(wait)
	_, err = buy(ctx, attempt(1, alice))
	require.NoError(t, err)
	require.EqualValues(t, 4, sold.Load())
}

// The global limit holds across two instances sharing one Redis: GCRA lets
// at most Burst + Rate·t through in t seconds, whoever asks.
func TestGlobalLimitAcrossInstances(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		rate, burst, shards int
	}{
		{"one key", 40, 8, 1},
		{"four shards", 40, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := stack.Redis(t)
			cfg := edge.Config{GlobalRate: tc.rate, GlobalBurst: tc.burst, GlobalShards: tc.shards}
			// Both instances must use the same keys: the test's own prefix is
			// not configurable, so flush the global keys first.
			for n := range tc.shards {
				require.NoError(t, redis_rate.NewLimiter(rdb).Reset(context.Background(), "seckill:rl:global:{"+itoa(n)+"}"))
			}
			a, _ := newEdge(t, rdb, cfg)
			b, _ := newEdge(t, rdb, cfg)
			var sold atomic.Int64
			buys := []func(context.Context, int64) error{
				func(ctx context.Context, u int64) error {
					_, err := chain(a.Gates(), seckill.Voucher{ID: 1}, accept(&sold))(ctx, attempt(1, u))
					return err
				},
				func(ctx context.Context, u int64) error {
					_, err := chain(b.Gates(), seckill.Voucher{ID: 1}, accept(&sold))(ctx, attempt(1, u))
					return err
				},
			}
			start := time.Now()
			limited := 0
			for i := range 600 {
				err := buys[i%2](context.Background(), int64(i+1))
				if err != nil {
					require.ErrorIs(t, err, seckill.ErrRateLimited)
					limited++
				}
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(start).Seconds()
			bound := float64(tc.burst) + float64(tc.rate)*elapsed
			t.Logf("%s: %d allowed of 600 in %.2fs; GCRA bound %.0f", tc.name, sold.Load(), elapsed, bound)
			require.LessOrEqual(t, float64(sold.Load()), bound+1)
			require.GreaterOrEqual(t, float64(sold.Load()), 0.5*float64(tc.rate)*elapsed)
			require.Positive(t, limited)
		})
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

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
	require.ErrorIs(t, err, seckill.ErrRateLimited)
	require.Greater(t, retryAfter(err), time.Second)
	require.NoError(t, lim.Allow(ctx, ip+"-other"))
}
