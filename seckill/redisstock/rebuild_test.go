package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// forget deletes a voucher's keys the way FLUSHALL would, without touching
// the other tests' vouchers on the shared server.
func (b bundle) forget(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	keys, err := b.rdb.Keys(ctx, fmt.Sprintf("seckill:{v%d}:*", id)).Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		require.NoError(t, b.rdb.Del(ctx, keys...).Err())
	}
}

func TestRebuildFromTruth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 20, 5)
	u1, u2, u3, stale := next(), next(), next(), next()
	persisted, inFlight, cancelled := res(v, u1, 2, "ka"), res(v, u2, 1, ""), res(v, u3, 3, "kc")
	for _, r := range []seckill.Reservation{persisted, inFlight, cancelled, res(v, stale, 4, "")} {
		b.reserve(t, r)
	}

	truth := redisstock.Truth{
		Voucher:  v,
		Holds:    []seckill.Reservation{persisted},
		InFlight: []seckill.Reservation{inFlight},
		Released: []seckill.Reservation{cancelled},
	}
	truth.Voucher.StockLeft = 17

	// Over a drifted state (the stale user's hold is unknown to PostgreSQL)
	// and over nothing at all (Redis lost its data): the same result.
	for _, lost := range []bool{false, true} {
		if lost {
			b.forget(t, v.ID)
		}
		require.NoError(t, b.store.Rebuild(ctx, truth))
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 17, Total: 20, Held: 3, Holds: 2, Pending: 1}, snap)

		keys, err := b.rdb.Keys(ctx, fmt.Sprintf("seckill:{v%d}:*", v.ID)).Result()
		require.NoError(t, err)
		sort.Strings(keys)
		k := redisstock.VoucherKeys(v.ID)
		want := []string{k.Ledger, k.Meta, k.Pending, k.Released}
		sort.Strings(want)
		require.Equal(t, want, keys)
		mine, err := b.rdb.HMGet(ctx, k.Ledger, "u"+strconv.FormatInt(stale, 10)).Result()
		require.NoError(t, err)
		require.Equal(t, []any{nil}, mine, "the stale user's count and orders are gone")

		// Request keys answer with their orders, live or final.
		for _, r := range []seckill.Reservation{persisted, cancelled} {
			again := r
			again.OrderID = next()
			got, err := b.store.Reserve(ctx, again)
			require.NoError(t, err)
			require.True(t, got.Replayed)
			require.Equal(t, r.OrderID, got.OrderID)
		}
		h, ok, err := b.store.Hold(ctx, persisted.OrderID, []int64{v.ID})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, persisted.Quantity, h.Quantity)
		require.Equal(t, persisted.ReservedAt.UnixMilli(), h.ReservedAt.UnixMilli())
		pend, err := b.store.Pending(ctx, v.ID, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, pend, 1)
		require.Equal(t, inFlight.OrderID, pend[0].OrderID)
		holds, err := b.store.UserHolds(ctx, stale, []int64{v.ID})
		require.NoError(t, err)
		require.Empty(t, holds)
		// The per-user count came back: u1 holds 2 of 5.
		_, err = b.store.Reserve(ctx, res(v, u1, 4, ""))
		require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	}

	// The rebuilt voucher sells exactly what is left to a crowd.
	var held atomic.Int64
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() {
			if _, err := b.store.Reserve(ctx, res(v, next(), 1, "")); err == nil {
				held.Add(1)
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(17), held.Load())
	require.Zero(t, b.balanced(t, v).Left)
	// Releasing a rebuilt hold works like any other.
	ok, err := b.store.Release(ctx, v.ID, inFlight.OrderID, seckill.ReleaseIfPending)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), b.balanced(t, v).Left)
}

func TestRebuildRefusesBadTruth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	now := serverNow(t, b.rdb)
	v := voucher(10, 2, now, now.Add(time.Hour))
	hold := res(v, next(), 2, "")
	cases := map[string]redisstock.Truth{
		"does not balance": {Voucher: v, Holds: []seckill.Reservation{hold}},
		"other voucher":    {Voucher: withLeft(v, 8), Holds: []seckill.Reservation{res(voucher(1, 1, now, now.Add(time.Hour)), next(), 2, "")}},
		"listed twice":     {Voucher: withLeft(v, 6), Holds: []seckill.Reservation{hold}, InFlight: []seckill.Reservation{hold}},
		"bad quantity":     {Voucher: withLeft(v, 10), Released: []seckill.Reservation{res(v, next(), 0, "")}},
		"bad voucher":      {Voucher: withLeft(v, 11)},
	}
	for name, truth := range cases {
		require.ErrorIs(t, b.store.Rebuild(ctx, truth), apperr.ErrInvalidInput, name)
	}
	n, err := b.rdb.Exists(ctx, redisstock.VoucherKeys(v.ID).Meta).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
}

func withLeft(v seckill.Voucher, left int64) seckill.Voucher {
	v.StockLeft = left
	return v
}

// A rebuild racing buyers either wins before them or starts over: the
// voucher balances whatever the interleaving.
func TestRebuildDuringACrowdStaysBalanced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 1000, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := res(v, next(), 1, "")
				if _, err := b.store.Reserve(ctx, r); err == nil && r.OrderID%3 == 0 {
					_, _ = b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
				}
			}
		})
	}
	var rebuilt, conflicts int
	for range 20 {
		err := b.store.Rebuild(ctx, redisstock.Truth{Voucher: v})
		switch {
		case err == nil:
			rebuilt++
		case errors.Is(err, apperr.ErrConflict):
			conflicts++
		default:
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
	b.balanced(t, v)
	t.Logf("rebuilt %d times, gave up %d times under load", rebuilt, conflicts)
}
