package orders_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// holdStock is the Reader's stock: holdMap's holds, and nothing else (the
// Reader reads no more of the stock).
type holdStock struct {
	orders.Stock
	holds holdMap
}

func (h holdStock) Hold(ctx context.Context, orderID int64, voucherIDs []int64) (seckill.Reservation, bool, error) {
	return h.holds.Hold(ctx, orderID, voucherIDs)
}

func (h holdStock) UserHolds(ctx context.Context, userID int64, voucherIDs []int64) ([]seckill.Reservation, error) {
	return h.holds.UserHolds(ctx, userID, voucherIDs)
}

// holdMap stands in for the Redis holds (redisstock is tested against real
// Redis): this test is about the Reader's merge with PostgreSQL.
type holdMap map[int64]seckill.Reservation

func (h holdMap) Hold(_ context.Context, orderID int64, voucherIDs []int64) (seckill.Reservation, bool, error) {
	r, ok := h[orderID]
	if !ok || !contains(voucherIDs, r.VoucherID) {
		return seckill.Reservation{}, false, nil
	}
	return r, true, nil
}

func (h holdMap) UserHolds(_ context.Context, userID int64, voucherIDs []int64) ([]seckill.Reservation, error) {
	var out []seckill.Reservation
	for _, r := range h {
		if r.UserID == userID && contains(voucherIDs, r.VoucherID) {
			out = append(out, r)
		}
	}
	return out, nil
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 100, 10)
	active := func(ctx context.Context, _ time.Time) ([]int64, error) {
		return store.ActiveSeckillVoucherIDs(ctx, time.Now().Add(-time.Minute))
	}

	persisted := pgstoretest.Reservation(v.ID, 1, 2)
	held := pgstoretest.Reservation(v.ID, 1, 3)         // newer, not persisted yet
	othersHeld := pgstoretest.Reservation(v.ID, 2, 1)   // someone else's hold
	othersStored := pgstoretest.Reservation(v.ID, 2, 1) // someone else's order
	_, err := store.PersistBatch(ctx, []seckill.Reservation{persisted, othersStored}, time.Minute)
	require.NoError(t, err)
	// A persisted order stays held in Redis until it is released.
	holds := holdMap{persisted.OrderID: persisted, held.OrderID: held, othersHeld.OrderID: othersHeld}
	r := orders.NewReader(orders.ReaderConfig{Record: store, Stock: holdStock{holds: holds}, Active: active})

	o, err := r.Get(ctx, 1, persisted.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusCreated, o.Status)

	o, err = r.Get(ctx, 1, held.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusReserved, o.Status)
	require.Equal(t, 3*pgstoretest.PriceCents, o.AmountCents)
	require.Equal(t, held.ReservedAt, o.CreatedAt)
	require.True(t, o.PayDeadline.IsZero())

	for _, id := range []int64{othersHeld.OrderID, othersStored.OrderID, 424242} {
		_, err = r.Get(ctx, 1, id)
		require.ErrorIs(t, err, apperr.ErrNotFound, id)
	}

	list, err := r.List(ctx, 1)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, held.OrderID, list[0].ID)
	require.Equal(t, orders.StatusReserved, list[0].Status)
	require.Equal(t, persisted.OrderID, list[1].ID)
	require.Equal(t, orders.StatusCreated, list[1].Status)

	list, err = r.List(ctx, 3)
	require.NoError(t, err)
	require.Empty(t, list)

	failing := orders.NewReader(orders.ReaderConfig{Record: store, Stock: holdStock{holds: holds}, Active: func(context.Context, time.Time) ([]int64, error) { return nil, errors.New("db down") }})
	_, err = failing.Get(ctx, 1, held.OrderID)
	require.Error(t, err)
}

// A shopper's orders in pages: the rows and the holds not persisted yet,
// merged newest first, each once, and a status keeps the holds only when it
// is reserved.
func TestReaderPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 100, 100)
	active := func(ctx context.Context, _ time.Time) ([]int64, error) {
		return store.ActiveSeckillVoucherIDs(ctx, time.Now().Add(-time.Minute))
	}
	// Ids grow: stored, held, stored, held, ... so holds fall between rows.
	var stored []seckill.Reservation
	holds := holdMap{}
	var want []int64 // newest first
	for i := range 9 {
		r := pgstoretest.Reservation(v.ID, 1, 1)
		if i%2 == 0 {
			stored = append(stored, r)
		} else {
			holds[r.OrderID] = r
		}
		want = append([]int64{r.OrderID}, want...)
	}
	_, err := store.PersistBatch(ctx, stored, time.Minute)
	require.NoError(t, err)
	holds[stored[0].OrderID] = stored[0] // persisted and still held: the row wins
	r := orders.NewReader(orders.ReaderConfig{Record: store, Stock: holdStock{holds: holds}, Active: active})

	walk := func(p orders.Page) (ids []int64, statuses []orders.Status) {
		for pages := 0; pages < 20; pages++ {
			list, more, err := r.Page(ctx, 1, p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(list), p.Limit)
			for _, o := range list {
				ids = append(ids, o.ID)
				statuses = append(statuses, o.Status)
			}
			if !more {
				return ids, statuses
			}
			require.NotEmpty(t, list)
			p.Before = list[len(list)-1].ID
		}
		t.Fatal("the walk does not end")
		return nil, nil
	}
	for _, limit := range []int{1, 2, 4, 9, 50} {
		ids, _ := walk(orders.Page{Limit: limit})
		require.Equal(t, want, ids, "limit %d", limit)
	}
	ids, statuses := walk(orders.Page{Limit: 2, Status: orders.StatusReserved})
	require.Len(t, ids, 4, "the four holds only")
	for _, st := range statuses {
		require.Equal(t, orders.StatusReserved, st)
	}
	ids, _ = walk(orders.Page{Limit: 2, Status: orders.StatusCreated})
	require.Len(t, ids, 5, "the five rows only")
	require.Equal(t, stored[0].OrderID, ids[len(ids)-1])
}
