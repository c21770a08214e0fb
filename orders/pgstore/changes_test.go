package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Every change of a running sale is recorded in its own transaction, with
// who made it and the stock total after it, and listed oldest first; a
// change refused, or undone before its commit, leaves no record.
func TestVoucherChangesRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 10, 1)
	other := pgstoretest.NewVoucher(t, s, 3, 1)

	_, err := s.ChangeVoucher(ctx, v.ID, seckill.Change{AddStock: 5, By: "sha256:aa"}, nil, nil)
	require.NoError(t, err)
	end := v.EndAt.Add(time.Hour).Truncate(time.Second)
	_, err = s.ChangeVoucher(ctx, v.ID, seckill.Change{EndAt: end, By: "sha256:bb"}, nil, nil)
	require.NoError(t, err)
	_, err = s.ChangeVoucher(ctx, v.ID, seckill.Change{AdmitPerSecond: 5, By: "sha256:cc"}, nil, nil)
	require.ErrorIs(t, err, apperr.ErrInvalidInput, "no waiting room: refused")
	_, err = s.ChangeVoucher(ctx, v.ID, seckill.Change{AddStock: 1, By: "sha256:dd"}, nil,
		func(context.Context, seckill.Voucher, seckill.Voucher) error { return errors.New("redis said no") })
	require.Error(t, err, "undone before its commit")

	got, err := s.VoucherChanges(ctx, v.ID)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "sha256:aa", got[0].By)
	require.EqualValues(t, 5, got[0].AddStock)
	require.EqualValues(t, 15, got[0].StockTotal)
	require.True(t, got[0].EndAt.IsZero(), "the end unchanged")
	require.Equal(t, "sha256:bb", got[1].By)
	require.Zero(t, got[1].AddStock)
	require.True(t, end.Equal(got[1].EndAt), "%v", got[1].EndAt)
	require.EqualValues(t, 15, got[1].StockTotal)
	require.False(t, got[1].At.Before(got[0].At))
	require.WithinDuration(t, time.Now(), got[1].At, time.Minute)

	none, err := s.VoucherChanges(ctx, other.ID)
	require.NoError(t, err)
	require.Empty(t, none)
}
