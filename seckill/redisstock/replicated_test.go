package redisstock_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// With WaitReplicas a hold counts only once a replica has it. While the
// replica answers, buys hold. Frozen (a master cut off from its replicas,
// as before a failover), a buy is refused as unavailable and its hold given
// back, so nothing a failover would lose was promised. Thawed, buys hold
// again, and the replica has every hold the master kept.
func TestReserveWaitsForAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, replica, rrdb := replicatedRedis(t)
	// A live replica acknowledges at once (WAIT asks it to); the bound is
	// wide for a busy machine and only the frozen replica's buy waits it out.
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb, WaitReplicas: 1, WaitTimeout: 2 * time.Second})}
	v := b.onSale(t, 10, 5)

	first := b.reserve(t, res(v, next(), 1, "first"))
	require.False(t, first.Replayed)

	require.NoError(t, replica.Freeze())
	_, err := b.store.Reserve(ctx, res(v, next(), 1, "while-cut-off"))
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	assert.Contains(t, err.Error(), "not acknowledged by the master's replicas", "refused for the replica, not for Redis")
	snap := b.balanced(t, v)
	assert.Equal(t, int64(1), snap.Held, "the unacknowledged hold was given back")
	assert.Equal(t, int64(9), snap.Left)

	replica.Thaw()
	b.reserve(t, res(v, next(), 1, "after"))
	snap = b.balanced(t, v)
	assert.Equal(t, int64(2), snap.Held)
	assert.Equal(t, int64(8), snap.Left)
	// What the master kept, the replica has: a promoted replica would
	// sell exactly what is left.
	require.Eventually(t, func() bool {
		left, err := redisstock.New(redisstock.Config{Redis: rrdb}).StockLeft(ctx, v.ID)
		return err == nil && left[v.ID] == 8
	}, 10*time.Second, 50*time.Millisecond, "the replica's stock is the master's")
}

// With WaitReplicas, a hold lives on the master while WAIT waits for a
// replica, and is given back when none acknowledged it (its key forgotten).
// Another gateway's retry of the same Idempotency-Key in that window must not
// be answered with that hold, which no message will ever carry: it finds it
// undecided, and once the hold is given back it holds anew.
func TestReplayOfAnUnacknowledgedHoldIsUndecided(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, replica, _ := replicatedRedis(t)
	// The window is the frozen replica's whole wait: wide for a busy
	// machine (a retry that comes after it holds anew all the same), and
	// within go-redis's read timeout (3 s), past which the reply is lost
	// and the hold left to the reconciler.
	waiting := redisstock.New(redisstock.Config{Redis: rdb, WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb})} // the other gateway
	v := b.onSale(t, 10, 5)

	require.NoError(t, replica.Freeze())
	defer replica.Thaw()
	first := res(v, next(), 1, "cut-off")
	firstErr := make(chan error, 1)
	go func() {
		_, err := waiting.Reserve(ctx, first)
		firstErr <- err
	}()
	require.Eventually(t, func() bool {
		snap, err := b.store.Snapshot(ctx, v.ID)
		return err == nil && snap.Held == 1
	}, 10*time.Second, time.Millisecond, "the hold is on the master, waiting for the replica")

	retry := first
	retry.OrderID = next()
	got, err := b.store.Reserve(ctx, retry)
	if err != nil {
		require.ErrorIs(t, err, seckill.ErrUndecided, "the retry waits for the hold's fate")
		require.ErrorIs(t, <-firstErr, apperr.ErrUnavailable, "not acknowledged: given back")
		got, err = b.store.Reserve(ctx, retry)
	} else {
		require.ErrorIs(t, <-firstErr, apperr.ErrUnavailable)
	}
	require.NoError(t, err)
	require.False(t, got.Replayed, "never the replay of the hold that was given back")
	require.Equal(t, retry.OrderID, got.OrderID, "the retry holds anew")
	snap := b.balanced(t, v)
	assert.Equal(t, int64(1), snap.Held, "the retry's hold only")
	assert.Equal(t, int64(9), snap.Left)
}

// A master without replicas acknowledges nothing: on both shapes (the
// cluster's script and WAIT go to the voucher's own master, or the answer
// would be a redirection, not this refusal) every hold is refused and
// given back.
func TestReserveWithoutReplicasRefusesEveryHold(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		store := redisstock.New(redisstock.Config{Redis: b.rdb, WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
		v := b.onSale(t, 10, 5)
		for range 3 {
			_, err := store.Reserve(context.Background(), res(v, next(), 1, ""))
			require.ErrorIs(t, err, apperr.ErrUnavailable)
			require.Contains(t, err.Error(), "not acknowledged by the master's replicas")
		}
		snap := b.balanced(t, v)
		assert.Zero(t, snap.Held)
		assert.Equal(t, int64(10), snap.Left)
	})
}

// With WaitReplicas, the concurrent buys of a bucket go in one script call
// followed by ONE WAIT for the whole batch. Frozen replica: the first buy
// goes alone and waits out its WAIT; the others queue meanwhile and leave
// together, so the master sees two WAITs for many buys, and every hold is
// given back (a batch short of replicas is refused buy by buy, as a single
// buy is). Thawed, a crowd holds in a few batches and the replica has it.
func TestABatchWaitsOnceForItsReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, replica, rrdb := replicatedRedis(t)
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb, WaitReplicas: 1, WaitTimeout: time.Second})}
	v := b.onSale(t, 100, 5)
	const crowd = 20

	require.NoError(t, replica.Freeze())
	waitsBefore := waitCalls(t, rdb)
	errs := buyTogether(b.store, v, crowd)
	for _, err := range errs {
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		require.Contains(t, err.Error(), "not acknowledged by the master's replicas")
	}
	// The lone first call and the batch of the rest; a goroutine late to
	// start may make a third.
	assert.LessOrEqual(t, waitCalls(t, rdb)-waitsBefore, int64(3), "one WAIT per batch, not per buy")
	snap := b.balanced(t, v)
	assert.Zero(t, snap.Held, "every unacknowledged hold was given back")
	assert.Equal(t, int64(100), snap.Left)

	replica.Thaw()
	waitsBefore = waitCalls(t, rdb)
	for _, err := range buyTogether(b.store, v, crowd) {
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, waitCalls(t, rdb)-waitsBefore, int64(crowd))
	snap = b.balanced(t, v)
	assert.Equal(t, int64(crowd), snap.Held)
	left, err := redisstock.New(redisstock.Config{Redis: rrdb}).StockLeft(ctx, v.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(100-crowd), left[v.ID], "answered only once the replica had every hold")
}

// WaitReplicasAuto waits for a replica only where the master has one: a
// master alone holds as without WAIT; once it gains a replica (seen within
// ReplicaCheck), a hold the frozen replica cannot acknowledge is refused.
func TestAutoWaitsOnlyWhereReplicasAre(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master, rdb := stacktest.PrivateRedis(t)
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb,
		WaitReplicas: redisstock.WaitReplicasAuto, WaitTimeout: 200 * time.Millisecond, ReplicaCheck: 50 * time.Millisecond})}
	v := b.onSale(t, 100, 100)
	before := waitCalls(t, rdb)
	for _, err := range buyTogether(b.store, v, 5) {
		require.NoError(t, err, "a master alone waits for nobody")
	}
	assert.Equal(t, before, waitCalls(t, rdb), "no WAIT on a master alone")

	replica, _ := attachReplica(t, master, rdb)
	require.NoError(t, replica.Freeze())
	defer replica.Thaw()
	require.Eventually(t, func() bool {
		_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
		return err != nil && strings.Contains(err.Error(), "not acknowledged by the master's replicas")
	}, 10*time.Second, 60*time.Millisecond, "a master with a replica makes holds wait for it")
	b.balanced(t, v)
}

// buyTogether starts n buys of v by n shoppers at once and returns their
// errors.
func buyTogether(store *redisstock.Store, v seckill.Voucher, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = store.Reserve(context.Background(), res(v, next(), 1, ""))
		})
	}
	wg.Wait()
	return errs
}

// waitCalls is how many WAIT commands rdb's server has run.
func waitCalls(t testing.TB, rdb redis.Cmdable) int64 { return commandCalls(t, rdb, "wait") }

// commandCalls is how many times rdb's server has run the command name
// (lower case).
func commandCalls(t testing.TB, rdb redis.Cmdable, name string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	_, rest, ok := strings.Cut(info, "cmdstat_"+name+":calls=")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
	require.NoError(t, err)
	return n
}

// replicatedRedis is a private redis-server with a private replica, once
// the replica is online: the master's client, the replica and its client.
func replicatedRedis(t testing.TB) (*redis.Client, *devstack.Redis, *redis.Client) {
	t.Helper()
	master, rdb := stacktest.PrivateRedis(t)
	replica, rrdb := attachReplica(t, master, rdb)
	return rdb, replica, rrdb
}

// attachReplica starts a private Redis, makes it a replica of master
// (whose client is rdb) and returns once the master reports it online: the
// replica and its client.
func attachReplica(t testing.TB, master *devstack.Redis, rdb *redis.Client) (*devstack.Redis, *redis.Client) {
	t.Helper()
	ctx := context.Background()
	replica, rrdb := stacktest.PrivateRedis(t)
	host, port, err := net.SplitHostPort(master.Addr)
	require.NoError(t, err)
	require.NoError(t, rrdb.ReplicaOf(ctx, host, port).Err())
	require.Eventually(t, func() bool {
		info, err := rdb.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 20*time.Second, 50*time.Millisecond, "the replica is online")
	return replica, rrdb
}

// BenchmarkReserveWaitReplicas is what waiting for a replica costs a
// reservation, on a master with one replica (both private, on this
// machine): the group commit as shipped against each hold in a pipeline
// of its own with WAIT 1.
func BenchmarkReserveWaitReplicas(b *testing.B) {
	ctx := context.Background()
	rdb, _, _ := replicatedRedis(b)
	now := serverNow(b, rdb)
	v := voucher(seckill.MaxStock, 1, now.Add(-time.Minute), now.Add(time.Hour))
	require.NoError(b, redisstock.New(redisstock.Config{Redis: rdb}).Warm(ctx, v))
	for _, c := range []struct {
		name  string
		store *redisstock.Store
	}{
		{"group-commit", redisstock.New(redisstock.Config{Redis: rdb})},
		{"wait-1-replica", redisstock.New(redisstock.Config{Redis: rdb, WaitReplicas: 1, WaitTimeout: time.Second})},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(25)
			client, server := cpuTime(b), redisCost(b, rdb)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.store.Reserve(ctx, res(v, next(), 1, "")); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-client).Microseconds())/float64(b.N), "client-cpu-µs/op")
			reportRedis(b, redisCost(b, rdb).Sub(server))
		})
	}
}

// The dev sale's shape under WaitReplicasAuto on a master with a live
// replica: a crowd of keyed buys, two per shopper, all at once, goes in
// batches that each wait once. Exactly the stock is accepted, every other
// buy is refused for the stock or the shopper's limit (none for the
// replica), and every accepted hold is still held on the master and on its
// replica: none of them was given back behind its caller's back.
func TestAutoBatchesKeepEveryAcceptedHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, _, rrdb := replicatedRedis(t)
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb,
		WaitReplicas: redisstock.WaitReplicasAuto, WaitTimeout: 2 * time.Second})}
	const stock, shoppers = 10, 20
	v := b.onSale(t, stock, 1)
	waitsBefore := waitCalls(t, rdb)

	firstUser := next() * 1000 // ids no other test's shoppers have
	results := make([]error, 2*shoppers)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			user := firstUser + int64(i%shoppers)
			_, results[i] = b.store.Reserve(ctx, res(v, user, 1, "attempt-"+strconv.Itoa(i)))
		})
	}
	wg.Wait()

	accepted := 0
	for _, err := range results {
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, seckill.ErrSoldOut), errors.Is(err, seckill.ErrLimitExceeded):
		default:
			t.Fatalf("a buy refused for something other than stock or limit: %v", err)
		}
	}
	assert.Equal(t, stock, accepted, "exactly the stock is accepted")
	assert.Greater(t, waitCalls(t, rdb), waitsBefore, "auto waited for the master's replica")
	snap := b.balanced(t, v)
	assert.Equal(t, int64(stock), snap.Held, "every accepted hold is still held")
	assert.Zero(t, snap.Left)
	require.Eventually(t, func() bool {
		left, err := redisstock.New(redisstock.Config{Redis: rrdb}).StockLeft(ctx, v.ID)
		return err == nil && left[v.ID] == 0
	}, 10*time.Second, 50*time.Millisecond, "the replica has every accepted hold")
}
