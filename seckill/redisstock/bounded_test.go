package redisstock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/cost"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Every key of a sale expires at its end plus the grace period: the keys
// the scripts write, the ones a rebuild writes, and the recent releases.
func TestSaleStateExpiresAfterTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	store := redisstock.New(redisstock.Config{Redis: b.rdb, StateGrace: time.Second})
	now := serverNow(t, b.rdb)
	v := voucher(10, 3, now.Add(-time.Minute), now.Add(2*time.Second))
	require.NoError(t, store.Warm(ctx, v))
	user := next()
	kept, gone := res(v, user, 1, "a"), res(v, user, 1, "b")
	for _, r := range []seckill.Reservation{kept, gone} {
		_, err := store.Reserve(ctx, r)
		require.NoError(t, err)
	}
	ok, err := store.Release(ctx, v.ID, gone.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, ok)

	pattern := fmt.Sprintf("seckill:{v%d}:*", v.ID)
	keys, err := b.rdb.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	require.Len(t, keys, 7, "meta, buyers, reqs, orders, pending, released and the user's set: %v", keys)
	deadline := v.EndAt.Add(time.Second)
	for _, k := range keys {
		at, err := b.rdb.PExpireTime(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, deadline.UnixMilli(), at.Milliseconds(), "%s expires at the end plus the grace", k)
	}

	// A rebuild (the healer's, the operator's) keeps the same deadline.
	require.NoError(t, store.Rebuild(ctx, redisstock.Truth{Voucher: withLeft(v, 9),
		Holds: []seckill.Reservation{kept}, Released: []seckill.Reservation{gone}}))
	keys, err = b.rdb.Keys(ctx, pattern).Result()
	require.NoError(t, err)
	require.Len(t, keys, 6, "nothing in flight, so no pending set: %v", keys)
	for _, k := range keys {
		at, err := b.rdb.PExpireTime(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, deadline.UnixMilli(), at.Milliseconds(), "%s expires at the end plus the grace after a rebuild", k)
	}

	require.Eventually(t, func() bool {
		keys, err := b.rdb.Keys(ctx, pattern).Result()
		return err == nil && len(keys) == 0
	}, 30*time.Second, 50*time.Millisecond, "nothing of the sale is left once the grace is over")
	_, err = store.Reserve(ctx, res(v, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrStockMissing)
}

// While a sale runs, a released order's tombstone and request key live for
// the idempotency window: inside it a replay answers with the released order
// and a second release gives nothing; after it both are forgotten by later
// releases, so buy-then-cancel churn leaves bounded state. Live holds keep
// their keys. The snapshot's counters follow every step.
func TestReleasedOrdersAreForgottenAfterTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	const window = time.Second
	store := redisstock.New(redisstock.Config{Redis: b.rdb, IdempotencyWindow: window})
	v := b.onSale(t, 5, 1)
	k := redisstock.VoucherKeys(v.ID)
	live := res(v, next(), 1, "live")
	_, err := store.Reserve(ctx, live)
	require.NoError(t, err)

	churn := func(n int) []seckill.Reservation {
		var out []seckill.Reservation
		for i := range n {
			r := res(v, next(), 1, "churn-"+strconv.Itoa(i))
			_, err := store.Reserve(ctx, r)
			require.NoError(t, err)
			ok, err := store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
			require.NoError(t, err)
			require.True(t, ok)
			out = append(out, r)
		}
		return out
	}
	first := churn(40)
	snap, err := store.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 4, Total: 5, Held: 1, Holds: 1, Pending: 1}, snap)

	// Inside the window: the replay answers with the released order (the
	// newest of the churn, so a slow machine's churn does not age it).
	last := first[len(first)-1]
	again := last
	again.OrderID = next()
	got, err := store.Reserve(ctx, again)
	require.NoError(t, err)
	require.Equal(t, seckill.ReserveResult{OrderID: last.OrderID, Replayed: true, StockLeft: 4}, got)
	ok, err := store.Release(ctx, v.ID, last.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	require.False(t, ok, "released once")

	time.Sleep(2 * window) // let the first churn age past the window
	// Each release forgets up to 16 aged releases: three later releases
	// forget all 40, whatever else they record.
	churn(3)
	n, err := b.rdb.ZCard(ctx, k.Released).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "only the recent releases are remembered")
	entries, err := b.rdb.HLen(ctx, k.Orders).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1+3, entries, "the live hold and the recent tombstones")
	reqs, err := b.rdb.HLen(ctx, k.Reqs).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1+3, reqs, "the live hold's key and the recent keys")

	// After the window the old key is a new attempt; the live hold's key
	// still answers with its order.
	got, err = store.Reserve(ctx, again)
	require.NoError(t, err)
	require.Equal(t, again.OrderID, got.OrderID)
	require.False(t, got.Replayed)
	replay := live
	replay.OrderID = next()
	got, err = store.Reserve(ctx, replay)
	require.NoError(t, err)
	require.Equal(t, live.OrderID, got.OrderID)
	require.True(t, got.Replayed)
	b.balanced(t, v)
}

// reserve.lua sets a key's expiry when the key appears, not on every call:
// once a sale's shared keys are there, a buy sets only the expiry of its
// user's set (new for the user's first hold), and a pending zset the
// workers emptied gets its expiry back with the next hold. Not parallel:
// it counts the commands the servers ran, on both shapes.
func TestReserveSetsEachExpiryOnce(t *testing.T) {
	ctx := context.Background()
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			rdb := stack.Client(t, shape)
			store := redisstock.New(redisstock.Config{Redis: rdb, StateGrace: time.Minute})
			now := serverNow(t, rdb)
			v := voucher(100, 1, now.Add(-time.Minute), now.Add(time.Hour))
			require.NoError(t, store.Warm(ctx, v))
			t.Cleanup(func() { _ = store.Unwarm(context.Background(), v.ID) })
			deadline := v.EndAt.Add(time.Minute).UnixMilli()
			expires := func(key string) {
				t.Helper()
				at, err := rdb.PExpireTime(ctx, key).Result()
				require.NoError(t, err)
				require.Equal(t, deadline, at.Milliseconds(), "%s expires at the end plus the grace", key)
			}
			k := redisstock.VoucherKeys(v.ID)

			first := res(v, next(), 1, "first")
			_, err := store.Reserve(ctx, first)
			require.NoError(t, err)
			for _, key := range []string{k.Meta, k.Buyers, k.Reqs, k.Orders, k.Pending, k.User(first.UserID)} {
				expires(key)
			}

			before, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			var holds []seckill.Reservation
			for i := range 10 {
				r := res(v, next(), 1, "k"+strconv.Itoa(i))
				_, err := store.Reserve(ctx, r)
				require.NoError(t, err)
				holds = append(holds, r)
				expires(k.User(r.UserID))
			}
			after, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			d := after.Sub(before)
			require.EqualValues(t, 10, d.Commands["evalsha"].Calls)
			require.EqualValues(t, 10, d.Commands["pexpireat"].Calls, "one per buy: the user's set")
			require.EqualValues(t, 10, d.Commands["exists"].Calls, "one look at the shared keys per buy")
			require.EqualValues(t, 10, d.Commands["hincrby"].Calls, "meta's counters in one HSET, the buyer's count in one HINCRBY")
			require.Zero(t, d.Commands["hexists"].Calls, "a keyed call's order id is checked by the HSETNX that records it")
			require.EqualValues(t, 10, d.Commands["hsetnx"].Calls)

			// The workers confirm every hold: the pending zset is gone, and
			// the next hold brings it back with its expiry.
			require.NoError(t, store.Confirm(ctx, append(holds, first)))
			n, err := rdb.Exists(ctx, k.Pending).Result()
			require.NoError(t, err)
			require.Zero(t, n)
			_, err = store.Reserve(ctx, res(v, next(), 1, ""))
			require.NoError(t, err)
			expires(k.Pending)
			snap, err := store.Snapshot(ctx, v.ID)
			require.NoError(t, err)
			require.True(t, snap.Balanced(), "%+v", snap)
			require.EqualValues(t, 12, snap.Held, "%+v", snap)
			require.EqualValues(t, 12, snap.Holds, "%+v", snap)
			require.EqualValues(t, 88, snap.Left, "%+v", snap)
			require.EqualValues(t, 1, snap.Pending, "%+v", snap)
		})
	}
}
