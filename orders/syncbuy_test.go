package orders_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// The synchronous kinds: a crowd buys concurrently; exactly the stock is
// sold, the per-user limit holds for limit vouchers, every order is created
// at once and shares the lifecycle (cancel gives the stock back).
func TestSyncKinds(t *testing.T) {
	t.Parallel()
	for _, kind := range []seckill.Kind{seckill.KindLimit, seckill.KindCommon} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			const total, limit, users = 50, 2, 40
			e := newLifeEnv(t, kind, total, limit, time.Minute)
			sb := orders.NewSyncBuyer(orders.SyncBuyerConfig{Record: e.store, IDs: e.ids, Events: e.events, PayTimeout: time.Minute, Log: testLog(t)})
			var sold atomic.Int64
			perUser := make([]atomic.Int64, users+1)
			var wg sync.WaitGroup
			for u := int64(1); u <= users; u++ {
				for range 4 {
					wg.Go(func() {
						o, replayed, err := sb.Buy(e.ctx, seckill.BuyRequest{VoucherID: e.v.ID, UserID: u, Quantity: 1})
						if err == nil {
							require.Equal(t, orders.StatusCreated, o.Status)
							require.False(t, replayed, "no key, no replay")
							sold.Add(1)
							perUser[u].Add(1)
							return
						}
						if !errors.Is(err, seckill.ErrSoldOut) && !errors.Is(err, seckill.ErrLimitExceeded) {
							t.Errorf("buy: %v", err)
						}
					})
				}
			}
			wg.Wait()
			require.Equal(t, int64(total), sold.Load(), "exactly the stock sold")
			for u := range perUser {
				if kind == seckill.KindLimit {
					require.LessOrEqual(t, perUser[u].Load(), int64(limit))
				}
			}
			e.check(t)

			// Same request key twice: one order. The buyer is someone the
			// crowd left with an order (without a limit, not everyone has one).
			var buyer int64
			for u := range perUser {
				if perUser[u].Load() > 0 {
					buyer = int64(u)
					break
				}
			}
			require.NotZero(t, buyer)
			e2 := seckill.BuyRequest{VoucherID: e.v.ID, UserID: buyer, Quantity: 1, RequestKey: "k"}
			list, err := e.store.OrdersByUser(e.ctx, buyer, 10)
			require.NoError(t, err)
			o, err := e.life.Cancel(e.ctx, buyer, list[0].ID)
			require.NoError(t, err)
			require.False(t, o.ReleasePending, "nothing to release in Redis for this kind")
			a, replayed, err := sb.Buy(e.ctx, e2)
			require.NoError(t, err)
			require.False(t, replayed, "the key's first order")
			b, replayed, err := sb.Buy(e.ctx, e2)
			require.NoError(t, err)
			require.Equal(t, a.ID, b.ID)
			require.True(t, replayed, "the same key again is the first order replayed")
			_, _, err = sb.Buy(e.ctx, seckill.BuyRequest{VoucherID: e.v.ID, UserID: 2, Quantity: 1})
			require.ErrorIs(t, err, seckill.ErrSoldOut)
			e.check(t)
		})
	}
}
