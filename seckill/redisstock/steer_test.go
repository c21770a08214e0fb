package redisstock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Stock added to a running sale of three buckets while shoppers buy sells
// exactly once, every bucket balanced; a later end moves the window and the
// expiry of the sale's keys; swapped, Steer takes back what was added; a
// voucher not on sale is refused, on both Redis shapes.
func TestSteer(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		before := b.shardedOnSale(t, 3, 30, 1)
		after := before
		after.StockTotal, after.StockLeft = 45, 45

		var sold atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(20 * time.Second)
		for range 8 {
			wg.Go(func() {
				for sold.Load() < 45 && time.Now().Before(deadline) {
					if _, err := b.store.Reserve(ctx, res(before, next(), 1, "")); err == nil {
						sold.Add(1)
					}
				}
			})
		}
		for sold.Load() < 10 {
			time.Sleep(time.Millisecond)
		}
		require.NoError(t, b.store.Steer(ctx, before, after))
		wg.Wait()
		require.EqualValues(t, 45, sold.Load(), "30 units, then the 15 added: no more")
		_, err := b.store.Reserve(ctx, res(before, next(), 1, ""))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		snap := b.balanced(t, after)
		require.Zero(t, snap.Left)

		// A later end: the window and the expiry of every key move.
		later := after
		later.EndAt = after.EndAt.Add(6 * time.Hour)
		require.NoError(t, b.store.Steer(ctx, after, later))
		for bucket := range 3 {
			k := redisstock.BucketKeys(later.ID, bucket)
			end, err := b.rdb.HGet(ctx, k.Meta, "end_ms").Int64()
			require.NoError(t, err)
			require.Equal(t, later.EndAt.UnixMilli(), end)
			for _, key := range []string{k.Meta, k.Ledger, k.Pending} {
				at, err := b.rdb.PExpireTime(ctx, key).Result()
				require.NoError(t, err)
				require.Equal(t, later.EndAt.Add(seckill.DefaultStateGrace).UnixMilli(), at.Milliseconds(), key)
			}
		}

		// Swapped: an addition whose record did not commit is taken back,
		// never more than is left.
		more := later
		more.StockTotal += 5
		require.NoError(t, b.store.Steer(ctx, later, more))
		b.balanced(t, more)
		require.NoError(t, b.store.Steer(ctx, more, later))
		require.Zero(t, b.balanced(t, later).Left)
		require.ErrorIs(t, b.store.Steer(ctx, more, later), apperr.ErrConflict, "nothing left to take back")

		gone := voucher(5, 1, later.BeginAt, later.EndAt)
		bigger := gone
		bigger.StockTotal = 6
		require.ErrorIs(t, b.store.Steer(ctx, gone, bigger), apperr.ErrUnavailable, "not on sale in Redis")
	})
}
