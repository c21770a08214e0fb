package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/seckill/seckill/pause"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startSystemOnRedisDB runs the system on a Redis database only this test
// uses (db), so it may wipe it, and returns a client of that database.
func startSystemOnRedisDB(t *testing.T, db int) (*testSystem, *redis.Client) {
	t.Helper()
	opts, err := redis.ParseURL(stack.RedisURL)
	require.NoError(t, err)
	opts.DB = db
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	ts := startSystem(t, map[string]string{"SECKILL_REDIS_URL": fmt.Sprintf("redis://%s/%d", opts.Addr, opts.DB)})
	ts.rdb = rdb
	return ts, rdb
}

// Redis loses its data in the middle of a crowd (FLUSHDB of a database only
// this test's process uses). Nobody calls repair: the healer notices, takes
// the voucher off sale while the messages in flight land, rebuilds it from
// PostgreSQL, and the crowd buys the rest. Meanwhile buyers get 503 with
// Retry-After, never 404; afterwards nothing is oversold, every per-user
// limit held and Redis agrees with PostgreSQL.
func TestHealAfterRedisDataLost(t *testing.T) {
	t.Parallel()
	ts, rdb := startSystemOnRedisDB(t, 11)

	const total, shoppers = 150, 400
	vid := ts.createVoucher(t, total, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	var flushed atomic.Bool
	var accepted, acceptedAfter, unavailable, noRetryAfter, notFound, limitBroken atomic.Int64
	var firstAfter atomic.Int64 // unix ns of the first 202 after the wipe
	var other sync.Map          // unexpected answers, for the failure message
	send := func(key, tok string) (done bool, a answer) {
		a = ts.buy(t, vid, tok, 1, key)
		switch {
		case a.status == http.StatusAccepted:
			return true, a
		case a.status == http.StatusConflict:
			return true, a
		case a.status == http.StatusServiceUnavailable:
			unavailable.Add(1)
			if a.header.Get("Retry-After") == "" {
				noRetryAfter.Add(1)
			}
		case a.status == http.StatusNotFound:
			notFound.Add(1)
		default:
			other.Store(string(a.raw), a.status)
		}
		return false, a
	}
	var wg sync.WaitGroup
	for i := range shoppers {
		wg.Go(func() {
			// Shoppers arrive over about six seconds, so the wipe lands
			// in the middle of the crowd.
			if pause.For(ctx, time.Duration(i)*15*time.Millisecond) != nil {
				return
			}
			tok := ts.shopper(t, int64(700_000+i))
			try := func(key string) (bool, answer) { return send(key, tok) }
			retryingShopper(ctx, "heal-"+strconv.Itoa(i), try, func(answer) {
				accepted.Add(1)
				if flushed.Load() {
					acceptedAfter.Add(1)
					firstAfter.CompareAndSwap(0, time.Now().UnixNano())
				}
			}, &limitBroken)
		})
	}
	require.Eventually(t, func() bool { return accepted.Load() >= total/3 }, time.Minute, 5*time.Millisecond)
	require.NoError(t, rdb.FlushDB(ctx).Err(), "Redis loses its data")
	wipedAt := time.Now()
	flushed.Store(true)
	t.Logf("Redis wiped after %d accepted", accepted.Load())

	require.Eventually(t, func() bool { return accepted.Load() == total }, 2*time.Minute, 20*time.Millisecond,
		"the voucher sells again without an operator (accepted %d of %d)", accepted.Load(), total)
	wg.Wait()
	stop()
	if at := firstAfter.Load(); at != 0 {
		t.Logf("observed: first 202 after the wipe %.1fs later; %d accepted after it; %d answers 503 meanwhile",
			time.Unix(0, at).Sub(wipedAt).Seconds(), acceptedAfter.Load(), unavailable.Load())
	}
	other.Range(func(k, v any) bool { t.Errorf("unexpected answer %v: %s", v, k); return true })
	require.Zero(t, notFound.Load(), "a voucher that exists is never 404, even while Redis lost it")
	require.Positive(t, unavailable.Load(), "buys during the gap are told 503")
	require.Zero(t, noRetryAfter.Load(), "every 503 carries Retry-After")
	require.Zero(t, limitBroken.Load(), "the per-user limit holds across the rebuild")
	require.Positive(t, acceptedAfter.Load(), "the voucher sold again after the wipe")

	ts.waitPersisted(t, vid, int(total))
	require.EqualValues(t, total, ts.checkInvariants(t, vid, 1))
	stats := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, stats.status, "%s", stats.raw)
	drift := stats.body["drift"].(map[string]any)
	require.Equal(t, true, drift["ok"], "Redis and PostgreSQL agree after the heal: %v", drift["problems"])

	m := regexp.MustCompile(`seckill_heals_total\{reason="missing"\} (\d+)`).FindSubmatch(ts.metricsText(t))
	require.NotNil(t, m, "the heal is counted")
	n, _ := strconv.Atoi(string(m[1]))
	require.GreaterOrEqual(t, n, 1, "the heal is counted")
}
