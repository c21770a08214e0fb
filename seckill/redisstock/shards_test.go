package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/redisstock/redisstocktest"
)

// shardedOnSale warms a voucher of the given stock and limit over k buckets,
// its window open for the next hour.
func (b bundle) shardedOnSale(t testing.TB, k int, stock, limit int64) seckill.Voucher {
	t.Helper()
	now := serverNow(t, b.rdb)
	v := voucher(stock, limit, now.Add(-time.Minute), now.Add(time.Hour))
	v.Shards = k
	require.NoError(t, b.store.Warm(context.Background(), v))
	return v
}

// homedIn returns a fresh user id whose home bucket of k is bucket.
func homedIn(bucket, k int) int64 {
	for {
		if u := next(); int(u%int64(k)) == bucket {
			return u
		}
	}
}

func TestBucketKeysOneSlotEach(t *testing.T) {
	t.Parallel()
	slots := map[uint16]bool{}
	for b := range 8 {
		k := redisstock.BucketKeys(42, b)
		keys := []string{k.Meta, k.Ledger, k.Pending, k.Released, k.Moves, k.Credited}
		for _, key := range keys {
			require.Equal(t, keySlot(k.Meta), keySlot(key), key)
		}
		slots[keySlot(k.Meta)] = true
	}
	require.Len(t, slots, 8, "the buckets are eight slots")
	require.Equal(t, redisstock.VoucherKeys(42), redisstock.BucketKeys(42, 0), "bucket 0 is the voucher's keys of one shard")
	require.Equal(t, "seckill:{v42}:meta", redisstock.BucketKeys(42, 0).Meta)
	require.Equal(t, "seckill:{v42.3}:meta", redisstock.BucketKeys(42, 3).Meta)
	k := redisstock.BucketKeys(42, 5)
	require.Equal(t, keySlot(redisstock.VoucherKeys(42).Meta), keySlot(k.Shards), "the shard count lives with bucket 0")
	require.Equal(t, keySlot(redisstock.VoucherKeys(42).Meta), keySlot(k.Heal), "one heal lock per voucher")
}

func TestShardedWarmSplitsStock(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		v := b.shardedOnSale(t, 8, 21, 3)
		for bucket, want := range []int64{3, 3, 3, 3, 3, 2, 2, 2} {
			require.Equal(t, want, redisstocktest.BucketStock(t, b.rdb, v.ID, bucket), "bucket %d", bucket)
		}
		require.NoError(t, b.store.Warm(ctx, v), "a retried warm is harmless")
		other := v
		other.Shards = 4
		require.ErrorIs(t, b.store.Warm(ctx, other), apperr.ErrConflict, "the shard count is part of the sale")
		left, err := b.store.StockLeft(ctx, v.ID)
		require.NoError(t, err)
		require.Equal(t, map[int64]int64{v.ID: 21}, left)
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 21, Total: 21}, snap)

		// A fresh Store (another process) finds the bucket count in Redis.
		fresh := redisstock.New(redisstock.Config{Redis: b.rdb})
		u := homedIn(6, 8)
		got, err := fresh.Reserve(ctx, res(v, u, 1, "k"))
		require.NoError(t, err)
		require.Equal(t, int64(1), redisstocktest.BucketStock(t, b.rdb, v.ID, 6), "bought in the user's home bucket")
		require.Equal(t, int64(1), got.StockLeft, "the home bucket's figure, while it is not 0")
	})
}

// TestShardedNoSoldOutWhileStockRemains: stock left in one bucket only is
// still sold to a shopper homed elsewhere, up to the last unit; then sold out.
func TestShardedNoSoldOutWhileStockRemains(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		v := b.shardedOnSale(t, 8, 16, 100)
		// Empty every bucket but 5 with buyers homed there.
		var first seckill.Reservation
		for bucket := range 8 {
			if bucket == 5 {
				continue
			}
			r := res(v, homedIn(bucket, 8), 2, "")
			b.reserve(t, r)
			require.Equal(t, int64(0), redisstocktest.BucketStock(t, b.rdb, v.ID, bucket))
			if bucket == 0 {
				first = r
			}
		}
		require.Equal(t, int64(2), redisstocktest.BucketStock(t, b.rdb, v.ID, 5))

		// A shopper of bucket 2 buys both units left in bucket 5, one at a
		// time: its bucket is empty, the stock moves to it.
		u := homedIn(2, 8)
		for i := range 2 {
			got, err := b.store.Reserve(ctx, res(v, u, 1, "k"+strconv.Itoa(i)))
			require.NoError(t, err, "unit %d: stock remains in bucket 5", i)
			require.Equal(t, int64(1-i), got.StockLeft, "the voucher's stock, not the home bucket's")
		}
		b.balanced(t, v)
		got, err := b.store.Reserve(ctx, res(v, u, 1, "k9"))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		require.Equal(t, int64(0), got.StockLeft)

		// A release in bucket 0 is bought by a shopper homed in bucket 7,
		// two units at once.
		ok, err := b.store.Release(ctx, v.ID, first.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(2), redisstocktest.BucketStock(t, b.rdb, v.ID, 0))
		b.reserve(t, res(v, homedIn(7, 8), 2, ""))
		_, err = b.store.Reserve(ctx, res(v, homedIn(7, 8), 1, ""))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		snap := b.balanced(t, v)
		require.Equal(t, int64(16), snap.Held)
		require.Equal(t, int64(0), snap.Left)
	})
}

// TestShardedCrowd: many goroutines on an 8-bucket voucher, the users skewed
// to two buckets so most buys need stock moved in, each buy sent twice with
// its Idempotency-Key. Every rule holds: no oversell, the per-user limit
// exactly, one order per key, and everything sells (sold_out is never the
// answer while stock remains, so nothing is left at the end).
func TestShardedCrowd(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		const stock, limit, users = 300, 3, 200
		v := b.shardedOnSale(t, 8, stock, limit)
		uids := make([]int64, users)
		for i := range uids {
			bucket := 0
			switch {
			case i%10 < 6:
				bucket = 0
			case i%10 < 9:
				bucket = 1
			default:
				bucket = i % 8
			}
			uids[i] = homedIn(bucket, 8)
		}
		type answer struct {
			user    int64
			key     string
			orderID int64
			soldOut bool
		}
		var mu sync.Mutex
		var answers []answer
		var wg sync.WaitGroup
		for _, u := range uids {
			for attempt := range limit + 1 {
				key := fmt.Sprintf("k%d", attempt)
				for range 2 { // a shopper's retry of the same request
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							r := res(v, u, 1, key)
							got, err := b.store.Reserve(ctx, r)
							if errors.Is(err, apperr.ErrUnavailable) {
								continue // a shopper retries a 503
							}
							if err == nil && !got.Replayed {
								// Its message written: the other send's
								// replay, undecided until now, may answer.
								if err := b.store.Promise(ctx, r); err != nil {
									t.Errorf("promise: %v", err)
								}
							}
							a := answer{user: u, key: key}
							switch {
							case err == nil:
								a.orderID = got.OrderID
							case errors.Is(err, seckill.ErrSoldOut):
								a.soldOut = true
							case errors.Is(err, seckill.ErrLimitExceeded):
							default:
								t.Errorf("reserve: %v", err)
							}
							mu.Lock()
							answers = append(answers, a)
							mu.Unlock()
							return
						}
					}()
				}
			}
		}
		wg.Wait()

		orders := map[int64]int64{} // order -> user
		byKey := map[string]int64{}
		perUser := map[int64]map[int64]bool{}
		soldOut := 0
		for _, a := range answers {
			if a.soldOut {
				soldOut++
			}
			if a.orderID == 0 {
				continue
			}
			orders[a.orderID] = a.user
			k := strconv.FormatInt(a.user, 10) + ":" + a.key
			if first, ok := byKey[k]; ok {
				require.Equal(t, first, a.orderID, "both sends of a key get one order")
			}
			byKey[k] = a.orderID
			if perUser[a.user] == nil {
				perUser[a.user] = map[int64]bool{}
			}
			perUser[a.user][a.orderID] = true
		}
		require.Len(t, orders, stock, "everything sold, nothing oversold")
		for u, os := range perUser {
			require.LessOrEqual(t, len(os), limit, "user %d", u)
		}
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 0, Total: stock, Held: stock, Holds: stock, Pending: stock}, snap)
		// Every order is held in its buyer's home bucket.
		for oid, u := range orders {
			h, ok, err := b.store.Hold(ctx, oid, []int64{v.ID})
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, u, h.UserID)
		}
		t.Logf("%d answers, %d sold out", len(answers), soldOut)
	})
}

// TestShardedRelease: a release gives the stock back to the bucket the hold
// was taken from, once, and stock moved there is still counted.
func TestShardedRelease(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		v := b.shardedOnSale(t, 4, 4, 5)
		u := homedIn(3, 4)
		var rs []seckill.Reservation
		for i := range 3 { // the first from home, the others moved in
			r := res(v, u, 1, "k"+strconv.Itoa(i))
			b.reserve(t, r)
			rs = append(rs, r)
		}
		b.balanced(t, v)
		before := redisstocktest.BucketStock(t, b.rdb, v.ID, 3)
		ok, err := b.store.Release(ctx, v.ID, rs[1].OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, before+1, redisstocktest.BucketStock(t, b.rdb, v.ID, 3), "back to the bucket it was held in")
		ok, err = b.store.Release(ctx, v.ID, rs[1].OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.False(t, ok, "at most once")
		snap := b.balanced(t, v)
		require.Equal(t, int64(2), snap.Held)
		require.Equal(t, int64(2), snap.Left)

		// The other reads find the holds in the home bucket.
		holds, err := b.store.UserHolds(ctx, u, []int64{v.ID})
		require.NoError(t, err)
		require.Len(t, holds, 2)
		known, err := b.store.RequestKnown(ctx, v.ID, redisstock.Request{UserID: u, Key: "k1"})
		require.NoError(t, err)
		require.True(t, known)
		keys, complete, err := b.store.RequestKeys(ctx, v.ID, 100)
		require.NoError(t, err)
		require.True(t, complete)
		require.Len(t, keys, 3)
		id, found, err := b.store.RequestOrder(ctx, v.ID, redisstock.Request{UserID: u, Key: "k1"})
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, rs[1].OrderID, id, "the order the key made, released or not")
		require.Equal(t, keys[redisstock.Request{UserID: u, Key: "k1"}], id)
		_, found, err = b.store.RequestOrder(ctx, v.ID, redisstock.Request{UserID: u, Key: "never"})
		require.NoError(t, err)
		require.False(t, found)
		pend, err := b.store.Pending(ctx, v.ID, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, pend, 2)
		require.NoError(t, b.store.Confirm(ctx, pend[:1]))
		pend, err = b.store.Pending(ctx, v.ID, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, pend, 1)
		require.Equal(t, int64(1), b.balanced(t, v).Pending)
	})
}

// TestShardedHalfDoneMove: a mover that died between its two steps (donor
// debited, home not credited) leaves a move that FinishMoves, the
// reconciler's call, completes exactly once; the buckets balance throughout.
func TestShardedHalfDoneMove(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		v := b.shardedOnSale(t, 4, 40, 5)
		from, to := redisstock.BucketKeys(v.ID, 1), redisstock.BucketKeys(v.ID, 2)
		raw, err := redis.NewScript(lua.MoveOut).Run(ctx, b.rdb, []string{from.Meta, from.Moves}, "dead-mover", 4, 2).Slice()
		require.NoError(t, err)
		require.Equal(t, int64(4), raw[0])

		snap := b.balanced(t, v)
		require.Equal(t, int64(4), snap.Moving)
		require.Equal(t, int64(40), snap.Left, "stock on its way is still stock")
		require.Equal(t, int64(6), redisstocktest.BucketStock(t, b.rdb, v.ID, 1))
		require.Equal(t, int64(10), redisstocktest.BucketStock(t, b.rdb, v.ID, 2))

		n, err := b.store.FinishMoves(ctx, v.ID)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, int64(14), redisstocktest.BucketStock(t, b.rdb, v.ID, 2))
		snap = b.balanced(t, v)
		require.Equal(t, int64(0), snap.Moving)
		require.Equal(t, int64(40), snap.Left)
		n, err = b.store.FinishMoves(ctx, v.ID)
		require.NoError(t, err)
		require.Zero(t, n, "credited once")
		// A late second step of the dead mover changes nothing either.
		got, err := redis.NewScript(lua.MoveIn).Run(ctx, b.rdb, []string{to.Meta, to.Credited}, "dead-mover", 4, "w").Int64()
		require.NoError(t, err)
		require.Zero(t, got)
		require.Equal(t, int64(14), redisstocktest.BucketStock(t, b.rdb, v.ID, 2))
		b.balanced(t, v)

		// A move begun before a rebuild is never credited after it.
		raw, err = redis.NewScript(lua.MoveOut).Run(ctx, b.rdb, []string{from.Meta, from.Moves}, "stale", 1, 2).Slice()
		require.NoError(t, err)
		require.NoError(t, b.store.TakeOffSale(ctx, v.ID))
		require.NoError(t, b.store.Rebuild(ctx, redisstock.Truth{Voucher: v}))
		got, err = redis.NewScript(lua.MoveIn).Run(ctx, b.rdb, []string{to.Meta, to.Credited}, "stale", 1, raw[1]).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(-2), got)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 40, Total: 40}, b.balanced(t, v))
	})
}

// TestShardedRepair: taken off sale, every bucket refuses and the holds stay
// readable; Missing sees it; a rebuild from PostgreSQL's truth puts each
// order in its user's home bucket and the stock back in every bucket.
func TestShardedRepair(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		v := b.shardedOnSale(t, 8, 24, 5)
		var held []seckill.Reservation
		for bucket := range 8 {
			r := res(v, homedIn(bucket, 8), 2, "k")
			b.reserve(t, r)
			held = append(held, r)
		}
		require.NoError(t, b.store.TakeOffSale(ctx, v.ID))
		missing, err := b.store.Missing(ctx, []int64{v.ID})
		require.NoError(t, err)
		require.Equal(t, []int64{v.ID}, missing)
		for bucket := range 8 {
			_, err := b.store.Reserve(ctx, res(v, homedIn(bucket, 8), 1, ""))
			require.ErrorIs(t, err, seckill.ErrStockMissing, "bucket %d", bucket)
		}
		// A fresh process still finds every bucket's holds and releases.
		fresh := redisstock.New(redisstock.Config{Redis: b.rdb})
		ok, err := fresh.Release(ctx, v.ID, held[3].OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		h, ok, err := fresh.Hold(ctx, held[7].OrderID, []int64{v.ID})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, held[7].UserID, h.UserID)

		// PostgreSQL's truth: seven holds kept, one cancelled.
		truth := redisstock.Truth{Voucher: withLeft(v, 24-14), Released: []seckill.Reservation{held[3]}}
		for i, r := range held {
			if i != 3 {
				truth.Holds = append(truth.Holds, r)
			}
		}
		require.NoError(t, fresh.Rebuild(ctx, truth))
		missing, err = b.store.Missing(ctx, []int64{v.ID})
		require.NoError(t, err)
		require.Empty(t, missing)
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 10, Total: 24, Held: 14, Holds: 7}, snap)
		for i, r := range held {
			h, ok, err := b.store.Hold(ctx, r.OrderID, []int64{v.ID})
			require.NoError(t, err)
			require.Equal(t, i != 3, ok, "order %d", i)
			if ok {
				require.Equal(t, r.UserID, h.UserID)
			}
			// The key replays its order from the home bucket.
			again := r
			again.OrderID = next()
			got, err := b.store.Reserve(ctx, again)
			require.NoError(t, err)
			require.True(t, got.Replayed)
			require.Equal(t, r.OrderID, got.OrderID)
		}
		// Sells to the last unit again.
		sold := int64(0)
		for {
			_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
			if errors.Is(err, seckill.ErrSoldOut) {
				break
			}
			require.NoError(t, err)
			sold++
		}
		require.Equal(t, int64(10), sold)
		b.balanced(t, v)

		require.NoError(t, b.store.Unwarm(ctx, v.ID))
		for _, key := range []string{redisstock.VoucherKeys(v.ID).Shards, redisstock.BucketKeys(v.ID, 5).Meta,
			redisstock.BucketKeys(v.ID, 5).Ledger, redisstock.BucketKeys(v.ID, 6).Pending} {
			n, err := b.rdb.Exists(ctx, key).Result()
			require.NoError(t, err)
			require.Zero(t, n, "unwarm forgets %s", key)
		}
	})
}
