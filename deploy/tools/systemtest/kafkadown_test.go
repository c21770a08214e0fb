package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/redisstock"
)

// TestTwoKafkaNodesDown stops two of the three Kafka nodes gracefully (the
// one left leads every partition below min.insync.replicas) and checks the
// buying path: a buy is answered 503 with a Retry-After, its stock is back in
// Redis at once, nothing of it in PostgreSQL is or can become a live order,
// and a retry of its Idempotency-Key is not answered 202 while the brokers
// are down. A crowd buying meanwhile gets no 202 either. Then one node comes
// back: selling resumes by itself, the retried key is accepted and created,
// and nothing is oversold (seckill/RULES.md's invariants).
func TestTwoKafkaNodesDown(t *testing.T) {
	// This test is serial (main_test.go): it stops the Apache Kafka nodes every test's system writes to.
	ts := startSystem(t, nil)
	k := stack.ApacheKafka(t, 3)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := range k.Brokers {
			require.NoError(t, k.Start(ctx, i))
		}
		require.NoError(t, k.WaitInSync(ctx))
	})
	ctx := context.Background()
	const stock, limit, crowd = 40, 1, 30
	vid := ts.createVoucher(t, stock, limit, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	vnum, err := strconv.ParseInt(vid, 10, 64)
	require.NoError(t, err)
	snapshot := func() redisstock.Snapshot {
		s, err := redisstock.New(redisstock.Config{Redis: ts.rdb}).Snapshot(ctx, vnum)
		require.NoError(t, err)
		return s
	}

	// One order before the fault, persisted and confirmed.
	first := ts.buy(t, vid, ts.shopper(t, 900_001), 1, "before")
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
	ts.waitStatus(t, ts.shopper(t, 900_001), first.body["order_id"].(string), "created")
	require.Eventually(t, func() bool { return snapshot().Pending == 0 }, time.Minute, 50*time.Millisecond)

	for _, n := range []int{0, 1} {
		require.NoError(t, k.Stop(ctx, n))
	}

	// The shopper's buy: refused, with its stock back at once.
	const alice = 900_002
	aliceTok := ts.shopper(t, alice)
	began := time.Now()
	a := ts.buy(t, vid, aliceTok, 1, "alice")
	t.Logf("first buy with two nodes down: %d %s after %v", a.status, a.raw, time.Since(began).Round(time.Millisecond))
	require.Equal(t, http.StatusServiceUnavailable, a.status, "%s", a.raw)
	require.Equal(t, "unavailable", a.errorCode())
	require.NotEmpty(t, a.header.Get("Retry-After"), "a 503 carries a Retry-After")
	s := snapshot()
	require.Equal(t, int64(stock-1), s.Left, "the refused buy's stock is back in Redis at once: %+v", s)
	require.Zero(t, s.Pending, "no hold is kept for a refused buy: %+v", s)
	require.True(t, s.Balanced(), "%+v", s)

	live := func(user int64) int {
		var n int
		require.NoError(t, ts.pool.QueryRow(ctx, `SELECT count(*) FROM orders
			WHERE voucher_id = $1 AND user_id = $2 AND status <> 'failed'`, vnum, user).Scan(&n))
		return n
	}
	require.Zero(t, live(alice), "a refused buy has no live order")

	// Retries of the same key while the brokers are down: never a 202.
	for range 5 {
		began = time.Now()
		r := ts.buy(t, vid, aliceTok, 1, "alice")
		t.Logf("same key again: %d after %v", r.status, time.Since(began).Round(time.Millisecond))
		require.Equal(t, http.StatusServiceUnavailable, r.status, "a retry of a refused key while down: %s", r.raw)
		require.NotEmpty(t, r.header.Get("Retry-After"))
	}
	require.Equal(t, int64(stock-1), snapshot().Left)

	// A crowd, each shopper retrying its key until a final answer; one node
	// comes back a few seconds in.
	var back atomic.Bool
	var early202, refusedNoRetryAfter, limitBroken atomic.Int64
	var mu sync.Mutex
	accepted := map[int64]string{}
	cctx, stop := context.WithTimeout(ctx, 3*time.Minute)
	defer stop()
	var wg sync.WaitGroup
	for i := range crowd {
		user := int64(910_000 + i)
		tok := ts.shopper(t, user)
		wg.Go(func() {
			retryingShopper(cctx, fmt.Sprintf("crowd-%d", user), func(key string) (bool, answer) {
				wasBack := back.Load()
				r := ts.buy(t, vid, tok, 1, key)
				switch {
				case r.status == http.StatusAccepted && !wasBack:
					early202.Add(1)
				case r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") == "":
					refusedNoRetryAfter.Add(1)
				}
				return r.status == http.StatusAccepted || r.status == http.StatusConflict, r
			}, func(r answer) {
				mu.Lock()
				accepted[user] = r.body["order_id"].(string)
				mu.Unlock()
			}, &limitBroken)
		})
	}
	time.Sleep(3 * time.Second)
	s = snapshot()
	require.Equal(t, int64(stock-1), s.Left, "the crowd's refused buys hold nothing: %+v", s)
	require.Zero(t, s.Pending, "%+v", s)
	back.Store(true)
	require.NoError(t, k.Start(ctx, 0))

	// Alice's key is a new attempt now, accepted and persisted.
	var ok answer
	require.Eventually(t, func() bool {
		ok = ts.buy(t, vid, aliceTok, 1, "alice")
		return ok.status == http.StatusAccepted
	}, 2*time.Minute, 200*time.Millisecond, "selling never resumed after a node came back")
	ts.waitStatus(t, aliceTok, ok.body["order_id"].(string), "created")

	wg.Wait()
	require.NoError(t, cctx.Err(), "the crowd never finished")
	require.Zero(t, early202.Load(), "202s while two nodes were down")
	require.Zero(t, refusedNoRetryAfter.Load(), "503s without a Retry-After")
	require.Zero(t, limitBroken.Load(), "a shopper passed the per-user limit")
	require.Len(t, accepted, crowd, "every shopper of the crowd buys once selling resumes")

	// Everything settled: every accepted order created, nothing oversold.
	require.Eventually(t, func() bool { return snapshot().Pending == 0 }, 2*time.Minute, 50*time.Millisecond)
	for user, id := range accepted {
		var status string
		require.NoError(t, ts.pool.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1`, id).Scan(&status))
		require.Equal(t, "created", status, "user %d's accepted order %s", user, id)
	}
	require.Equal(t, 1, live(alice), "alice has exactly her one accepted order")
	ts.checkInvariants(t, vid, limit)
}
