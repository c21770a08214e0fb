package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
)

// A voucher is all paid for only when no stock is left and no order waits
// for payment: a created order may still time out and give its unit back,
// and a unit not yet persisted is still stock left.
func TestAllPaid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 2, 1)
	other := pgstoretest.NewVoucher(t, s, 5, 1)

	paid, err := s.AllPaid(ctx, v.ID, other.ID, v.ID+1000)
	require.NoError(t, err)
	require.Empty(t, trues(paid), "nothing sold yet")

	r1, r2 := pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 2, 1)
	_, err = s.PersistBatch(ctx, []seckill.Reservation{r1}, payTimeout)
	require.NoError(t, err)
	_, err = s.Pay(ctx, 1, r1.OrderID)
	require.NoError(t, err)
	paid, err = s.AllPaid(ctx, v.ID)
	require.NoError(t, err)
	require.False(t, paid[v.ID], "one unit still on sale")

	_, err = s.PersistBatch(ctx, []seckill.Reservation{r2}, payTimeout)
	require.NoError(t, err)
	paid, err = s.AllPaid(ctx, v.ID)
	require.NoError(t, err)
	require.False(t, paid[v.ID], "sold out, but one order waits for payment")

	_, err = s.Pay(ctx, 2, r2.OrderID)
	require.NoError(t, err)
	paid, err = s.AllPaid(ctx, v.ID, other.ID)
	require.NoError(t, err)
	require.Equal(t, []int64{v.ID}, trues(paid))

	none, err := s.AllPaid(ctx)
	require.NoError(t, err)
	require.Empty(t, none)
}

// trues lists the keys of m whose value is true.
func trues(m map[int64]bool) []int64 {
	var out []int64
	for id, ok := range m {
		if ok {
			out = append(out, id)
		}
	}
	return out
}
