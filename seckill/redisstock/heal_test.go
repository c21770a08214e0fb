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

// Of many healers racing for one voucher's lease, exactly one gets it; a
// rebuild fenced by a lease that was lost (expired, taken by the next
// healer) commits nothing; a dead healer's lease expires by itself.
func TestHealLeaseAndFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 10, 2)

	var got atomic.Int64
	var wg sync.WaitGroup
	locks := make([]*redisstock.HealLock, 16)
	for i := range locks {
		wg.Go(func() {
			l, ok, err := b.store.LockHeal(ctx, v.ID, 300*time.Millisecond)
			require.NoError(t, err)
			if ok {
				got.Add(1)
				locks[i] = l
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, got.Load(), "one healer at a time")
	var first *redisstock.HealLock
	for _, l := range locks {
		if l != nil {
			first = l
		}
	}
	ok, err := first.Renew(ctx)
	require.NoError(t, err)
	require.True(t, ok)

	// The first healer stalls past its lease; the next one takes over.
	require.Eventually(t, func() bool {
		_, ok, err := b.store.LockHeal(ctx, v.ID, time.Minute)
		if ok {
			return true
		}
		require.NoError(t, err)
		return false
	}, 10*time.Second, 20*time.Millisecond, "a dead healer's lease expires")
	ok, err = first.Renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the stalled healer learns it lost the lease")

	before, err := b.store.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	stale := v
	stale.StockLeft = 3
	err = b.store.Rebuild(ctx, redisstock.Truth{Voucher: stale, Holds: []seckill.Reservation{res(v, next(), 7, "")}, Fence: first.Token()})
	require.ErrorIs(t, err, apperr.ErrConflict, "a fenced rebuild with a lost lease commits nothing")
	after, err := b.store.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoError(t, first.Unlock(ctx), "unlocking a lost lease leaves the new owner's alone")
	_, ok, err = b.store.LockHeal(ctx, v.ID, time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "the new owner still holds the lease")
}

// Missing finds the vouchers Redis lost; a gateway's heal request reaches a
// waiting healer, once per voucher however many buyers ask.
func TestMissingAndHealRequests(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	kept, lost := b.onSale(t, 10, 1), b.onSale(t, 10, 1)
	b.forget(t, lost.ID)
	missing, err := b.store.Missing(ctx, []int64{kept.ID, lost.ID})
	require.NoError(t, err)
	require.Equal(t, []int64{lost.ID}, missing)

	_, err = b.store.Reserve(ctx, res(lost, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrStockMissing)

	for range 50 {
		b.store.RequestHeal(ctx, lost.ID)
	}
	got, err := b.store.HealRequests(ctx, time.Second)
	require.NoError(t, err)
	require.Contains(t, got, lost.ID)
	n := 0
	for _, id := range got {
		if id == lost.ID {
			n++
		}
	}
	require.Equal(t, 1, n, "a crowd refused for one voucher asks once")
}
