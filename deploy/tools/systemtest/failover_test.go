package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// TestRedisMasterFailover runs the system on a Redis Cluster of three
// masters with one replica each (cluster-node-timeout 1 s), kills the
// master that holds one voucher's slot in the middle of a crowd with
// SIGKILL, and lets the replica take over by itself. Shoppers retry their
// Idempotency-Key on 503 as a client should. Then: no oversell, the
// per-user limit, every 202 has its order in PostgreSQL, Redis and
// PostgreSQL agree. It logs what the shoppers saw, per voucher: the one on
// the killed master and one on another master.
func TestRedisMasterFailover(t *testing.T) {
	t.Parallel()
	dir, err := devstack.TempDir("seckill-failover-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	began := time.Now()
	cluster, err := devstack.StartRedisCluster(t.Context(), devstack.RedisClusterOptions{
		Dir: dir, Masters: 3, Replicas: 1, NodeTimeout: time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	t.Logf("cluster of 3 masters + 3 replicas up in %v", time.Since(began).Round(time.Millisecond))

	ts := startSystem(t, map[string]string{"SECKILL_REDIS_URL": "", "SECKILL_REDIS_CLUSTER_ADDRS": strings.Join(cluster.Addrs, ",")})
	const stock, shoppers = 200, 600
	hot := ts.createVoucher(t, stock, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	victim := masterOf(t, ts.rdb, hot)
	// A second voucher whose slot lives on another master.
	var other string
	for other == "" || masterOf(t, ts.rdb, other) == victim {
		other = ts.createVoucher(t, stock, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	}
	vouchers := []string{hot, other}

	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	type seen struct {
		mu       sync.Mutex
		statuses map[string]int // "202", "409 sold_out", "503 unavailable", ...
		first503 time.Time      // after the kill
		last503  time.Time
		slowest  time.Duration // of an answer after the kill
	}
	obs := map[string]*seen{hot: {statuses: map[string]int{}}, other: {statuses: map[string]int{}}}
	var killedAt atomic.Int64 // unix ns
	var accepted atomic.Int64
	var mu sync.Mutex
	orderIDs := map[string]map[string]bool{hot: {}, other: {}}
	limitBroken := atomic.Int64{}
	noRetryAfter := atomic.Int64{}

	attempt := func(vid, tok, key string) (final bool, a answer) {
		sent := time.Now()
		a = ts.buy(t, vid, tok, 1, key)
		o := obs[vid]
		label := strconv.Itoa(a.status)
		if a.status != http.StatusAccepted {
			label += " " + a.errorCode()
		}
		now := time.Now()
		o.mu.Lock()
		defer o.mu.Unlock()
		if k := killedAt.Load(); k != 0 {
			o.statuses[label]++
			o.slowest = max(o.slowest, now.Sub(sent))
			if a.status == http.StatusServiceUnavailable {
				if o.first503.IsZero() {
					o.first503 = now
				}
				o.last503 = now
			}
		}
		switch a.status {
		case http.StatusAccepted, http.StatusConflict:
			return true, a
		case http.StatusServiceUnavailable:
			if a.header.Get("Retry-After") == "" {
				noRetryAfter.Add(1)
			}
			return false, a
		default:
			t.Errorf("unexpected answer %d: %s", a.status, a.raw)
			return true, a
		}
	}
	var wg sync.WaitGroup
	for i := range shoppers {
		wg.Go(func() {
			// Shoppers arrive over about six seconds; the kill lands early.
			if pause.For(ctx, time.Duration(i)*10*time.Millisecond) != nil {
				return
			}
			vid := vouchers[i%2]
			tok := ts.shopper(t, int64(900_000+i))
			try := func(key string) (bool, answer) { return attempt(vid, tok, key) }
			retryingShopper(ctx, "fo-"+strconv.Itoa(i), try, func(a answer) {
				accepted.Add(1)
				mu.Lock()
				orderIDs[vid][a.body["order_id"].(string)] = true
				mu.Unlock()
			}, &limitBroken)
		})
	}
	require.Eventually(t, func() bool { return accepted.Load() >= 40 }, time.Minute, 5*time.Millisecond)
	require.NoError(t, cluster.Kill(victim))
	killed := time.Now()
	killedAt.Store(killed.UnixNano())
	require.Eventually(t, func() bool {
		m, err := cluster.Masters(ctx)
		return err == nil && len(m) == 3 && !slices.Contains(m, victim)
	}, 30*time.Second, 20*time.Millisecond, "no replica took over from %s", victim)
	promoted := time.Since(killed)
	wg.Wait()
	stop()

	require.Zero(t, limitBroken.Load(), "the per-user limit holds across the failover")
	require.Zero(t, noRetryAfter.Load(), "every 503 carries Retry-After")
	for _, vid := range vouchers {
		o := obs[vid]
		where := "on the killed master"
		if vid == other {
			where = "on another master"
		}
		var labels []string
		for l, n := range o.statuses {
			labels = append(labels, fmt.Sprintf("%s: %d", l, n))
		}
		sort.Strings(labels)
		window := "none"
		if !o.first503.IsZero() {
			window = fmt.Sprintf("from %.2fs to %.2fs after the kill (%.2fs)", o.first503.Sub(killed).Seconds(),
				o.last503.Sub(killed).Seconds(), o.last503.Sub(o.first503).Seconds())
		}
		t.Logf("voucher %s: answers after the kill {%s}; 503s %s; slowest answer %.2fs; replica promoted %.2fs after the kill",
			where, strings.Join(labels, ", "), window, o.slowest.Seconds(), promoted.Seconds())
	}

	// Every 202 is an order in PostgreSQL; nothing sold twice; Redis and
	// PostgreSQL agree once the healer has had its say.
	for _, vid := range vouchers {
		ids := make([]int64, 0, len(orderIDs[vid]))
		for id := range orderIDs[vid] {
			n, err := strconv.ParseInt(id, 10, 64)
			require.NoError(t, err)
			ids = append(ids, n)
		}
		var failed, found int
		require.Eventually(t, func() bool {
			err := ts.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status = 'failed') FROM orders WHERE id = ANY($1)`, ids).Scan(&found, &failed)
			return err == nil && found == len(ids)
		}, time.Minute, 50*time.Millisecond, "every 202 must become an order in PostgreSQL: %d of %d are", found, len(ids))
		t.Logf("voucher %s: %d accepted (202), of which %d failed afterwards", vid, len(ids), failed)
		require.Eventually(t, func() bool {
			stats := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", ts.cfg.AdminToken, nil, nil)
			drift, _ := stats.body["drift"].(map[string]any)
			return stats.status == http.StatusOK && drift["ok"] == true && drift["pending"] == float64(0)
		}, 90*time.Second, 100*time.Millisecond, "Redis and PostgreSQL must agree again")
		ts.checkInvariants(t, vid, 1)
	}
}

// masterOf is the address of the master that serves the voucher's slot.
func masterOf(t *testing.T, rdb redis.UniversalClient, voucherID string) string {
	t.Helper()
	id, err := strconv.ParseInt(voucherID, 10, 64)
	require.NoError(t, err)
	ctx := context.Background()
	slot, err := rdb.ClusterKeySlot(ctx, redisstock.SlotKey(id)).Result()
	require.NoError(t, err)
	shards, err := rdb.ClusterShards(ctx).Result()
	require.NoError(t, err)
	for _, s := range shards {
		for _, r := range s.Slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) {
				for _, n := range s.Nodes {
					if n.Role == "master" {
						return fmt.Sprintf("%s:%d", n.IP, n.Port)
					}
				}
			}
		}
	}
	t.Fatalf("no master serves slot %d", slot)
	return ""
}
