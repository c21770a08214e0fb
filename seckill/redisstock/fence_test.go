package redisstock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// stallHook holds a client's first command (or MULTI/EXEC) naming key with
// the command name at until the test lets it go: a healer that stalls at
// exactly that point, whatever the machine's speed.
type stallHook struct {
	key, at string
	armed   atomic.Bool
	stalled chan struct{} // closed when the command is held
	resume  chan struct{} // closed by the test to let it go
}

func newStallHook(key, at string) *stallHook {
	h := &stallHook{key: key, at: at, stalled: make(chan struct{}), resume: make(chan struct{})}
	h.armed.Store(true)
	return h
}

func (h *stallHook) hold(cmds []redis.Cmder) {
	named, at := false, false
	for _, c := range cmds {
		at = at || c.Name() == h.at
		named = named || slices.ContainsFunc(c.Args(), func(a any) bool { s, ok := a.(string); return ok && s == h.key })
	}
	if named && at && h.armed.CompareAndSwap(true, false) {
		close(h.stalled)
		<-h.resume
	}
}

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.hold([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.hold(cmds)
		return next(ctx, cmds)
	}
}

// hookedClient is a client of the shape whose every connection (a cluster
// client's node clients too: its WATCH and MULTI run on them) goes through h.
func hookedClient(t *testing.T, shape stacktest.RedisShape, h redis.Hook) redis.UniversalClient {
	t.Helper()
	if len(shape.ClusterAddrs) == 0 {
		opts, err := redis.ParseURL(shape.URL)
		require.NoError(t, err)
		rdb := redis.NewClient(opts)
		rdb.AddHook(h)
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: shape.ClusterAddrs, ClusterStateReloadInterval: time.Second})
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(h) })
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// bucketMetas is every bucket's meta hash (stock, total, held, epoch...).
func bucketMetas(t *testing.T, rdb redis.Cmdable, id int64, k int) []map[string]string {
	t.Helper()
	out := make([]map[string]string, k)
	for b := range k {
		m, err := rdb.HGetAll(context.Background(), redisstock.BucketKeys(id, b).Meta).Result()
		require.NoError(t, err)
		out[b] = m
	}
	return out
}

// A healer that stalls past its lease while rebuilding bucket 1 of a sharded
// voucher (before that bucket's WATCH: after its last look at the lease; or
// before its EXEC) resumes after the next healer rebuilt the voucher and a
// buyer held units in bucket 1: its write is refused in that bucket and in
// every other, and the hold stands.
func TestShardedRebuildFencedInEveryBucket(t *testing.T) {
	for _, shape := range stack.RedisShapes(t) {
		for _, at := range []string{"watch", "exec"} {
			t.Run(shape.Name+"/"+at, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				rdb := stack.Client(t, shape)
				b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb})}
				const k = 4
				v := b.shardedOnSale(t, k, 40, 10)
				require.NoError(t, b.store.Unwarm(ctx, v.ID), "Redis lost the voucher")

				hook := newStallHook(redisstock.BucketKeys(v.ID, 1).Meta, at)
				stale := redisstock.New(redisstock.Config{Redis: hookedClient(t, shape, hook)})
				lockA, ok, err := stale.LockHeal(ctx, v.ID, 3*time.Second)
				require.NoError(t, err)
				require.True(t, ok)
				done := make(chan error, 1)
				go func() { done <- stale.Rebuild(ctx, redisstock.Truth{Voucher: v, Fence: lockA.Token()}) }()
				select {
				case <-hook.stalled:
				case err := <-done:
					t.Fatalf("healer A finished before it reached bucket 1: %v", err)
				case <-time.After(30 * time.Second):
					t.Fatal("healer A never reached bucket 1")
				}

				// A's lease runs out; B takes it and rebuilds; a buyer holds 5
				// units in bucket 1.
				var lockB *redisstock.HealLock
				require.Eventually(t, func() bool {
					l, ok, err := b.store.LockHeal(ctx, v.ID, time.Minute)
					require.NoError(t, err)
					lockB = l
					return ok
				}, 30*time.Second, 20*time.Millisecond)
				require.NoError(t, b.store.Rebuild(ctx, redisstock.Truth{Voucher: v, Fence: lockB.Token()}))
				hold := res(v, homedIn(1, k), 5, "k")
				b.reserve(t, hold)
				before := bucketMetas(t, rdb, v.ID, k)
				require.Equal(t, "5", before[1]["stock"])

				close(hook.resume)
				select {
				case err := <-done:
					require.ErrorIs(t, err, apperr.ErrConflict, "the stale healer's rebuild is refused")
				case <-time.After(30 * time.Second):
					t.Fatal("healer A never returned")
				}
				require.Equal(t, before, bucketMetas(t, rdb, v.ID, k), "no bucket was written by the stale healer")
				h, ok, err := b.store.Hold(ctx, hold.OrderID, []int64{v.ID})
				require.NoError(t, err)
				require.True(t, ok, "the buyer's hold survives")
				require.Equal(t, int64(5), h.Quantity)

				// Started over from the last bucket, its write is refused in
				// every bucket too.
				require.ErrorIs(t, stale.Rebuild(ctx, redisstock.Truth{Voucher: v, Fence: lockA.Token()}), apperr.ErrConflict)
				require.Equal(t, before, bucketMetas(t, rdb, v.ID, k))
				snap := b.balanced(t, v)
				require.Equal(t, int64(5), snap.Held)
				require.Equal(t, int64(35), snap.Left)
				require.NoError(t, lockB.Unlock(ctx))
			})
		}
	}
}

// Every lease of a voucher carries a greater fencing number than the one
// before, even when Redis lost the last number given.
func TestHealFenceNumbersGrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := next()
	last := int64(0)
	for i := range 6 {
		if i%2 == 1 {
			require.NoError(t, b.rdb.Del(ctx, redisstock.VoucherKeys(id).HealFence).Err(), "the last number is lost")
		}
		l, ok, err := b.store.LockHeal(ctx, id, time.Minute)
		require.NoError(t, err)
		require.True(t, ok)
		num, _, found := strings.Cut(l.Token(), ":")
		require.True(t, found, l.Token())
		n, err := strconv.ParseInt(num, 10, 64)
		require.NoError(t, err)
		require.Greater(t, n, last, "lease %d", i)
		last = n
		require.NoError(t, l.Unlock(ctx))
	}
}
