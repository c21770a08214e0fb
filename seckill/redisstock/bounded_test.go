package redisstock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
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
	require.Len(t, keys, 4, "meta, ledger, pending and released: %v", keys)
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
	require.Len(t, keys, 4, "the same keys: %v", keys)
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
	require.NoError(t, store.Promise(ctx, live))

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
	fields, err := b.rdb.HKeys(ctx, k.Ledger).Result()
	require.NoError(t, err)
	kinds := map[string]int{}
	for _, f := range fields {
		switch f[0] {
		case 'r', 'u', '_':
			kinds[f[:1]]++
		default:
			kinds["order"]++
		}
	}
	require.Equal(t, map[string]int{"order": 1 + 3, "r": 1 + 3, "u": 1, "_": 1}, kinds,
		"the live hold and the recent tombstones, their request keys, the live hold's buyer, the sentinel")

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

// A sale's keys get their expiry when it is warmed, and no buy sets one: a
// hold is seven commands (the script call, two reads, TIME, three writes),
// and a pending zset the workers emptied keeps its expiry. Not parallel: it
// counts the commands the servers ran, on both shapes.
func TestReserveSetsNoExpiry(t *testing.T) {
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
			for _, key := range []string{k.Meta, k.Ledger, k.Pending} {
				expires(key)
			}

			// One hold first, so the script is loaded and the connections
			// are open before the count.
			holds := []seckill.Reservation{res(v, next(), 1, "")}
			_, err := store.Reserve(ctx, holds[0])
			require.NoError(t, err)
			before, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			for i := range 10 {
				key := ""
				if i%2 == 0 {
					key = "k" + strconv.Itoa(i)
				}
				r := res(v, next(), 1, key)
				_, err := store.Reserve(ctx, r)
				require.NoError(t, err)
				holds = append(holds, r)
			}
			after, err := cost.ReadRedis(ctx, rdb)
			require.NoError(t, err)
			d := after.Sub(before)
			require.EqualValues(t, 10, d.Commands["evalsha"].Calls)
			// The cluster client may refresh its slot map meanwhile.
			delete(d.Commands, "cluster|slots")
			require.EqualValues(t, 10*7, d.Total(), "seven commands a hold, keyed or not: %v", d.Commands)
			for _, c := range []string{"pexpireat", "exists", "hincrby", "hsetnx", "sadd"} {
				require.Zero(t, d.Commands[c].Calls, c)
			}

			// The workers confirm every hold: the pending zset stays, with
			// its expiry.
			require.NoError(t, store.Confirm(ctx, holds))
			expires(k.Pending)
			_, err = store.Reserve(ctx, res(v, next(), 1, ""))
			require.NoError(t, err)
			expires(k.Pending)
			expires(k.Ledger)
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
