package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// A voucher's grace for a missed turn is kept by the record, changed by a
// change of the running sale (0 included), and bounded by the table's own
// check as by the domain's.
func TestVoucherGraceKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	now := time.Now().UTC()
	v, err := s.CreateVoucher(ctx, seckill.Voucher{Title: "Held", Kind: seckill.KindSeckill, PriceCents: 1,
		StockTotal: 3, PerUserLimit: 1, BeginAt: now, EndAt: now.Add(time.Hour), GraceSeconds: 900,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 5}}, nil, nil)
	require.NoError(t, err)
	require.EqualValues(t, 900, v.GraceSeconds)
	got, err := s.Voucher(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 900, got.GraceSeconds)

	zero := int64(0)
	changed, err := s.ChangeVoucher(ctx, v.ID, seckill.Change{GraceSeconds: &zero, By: "sha256:aa"}, nil, nil)
	require.NoError(t, err)
	require.Zero(t, changed.GraceSeconds)
	tooLong := int64(seckill.MaxGraceSeconds + 1)
	_, err = s.ChangeVoucher(ctx, v.ID, seckill.Change{GraceSeconds: &tooLong, By: "sha256:aa"}, nil, nil)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)

	other := pgstoretest.NewVoucher(t, s, 3, 1)
	require.Zero(t, other.GraceSeconds, "a voucher made in code says its grace itself")
}
