// Package pgstoretest holds the fixtures that the tests of orders/pgstore and
// of the packages built on it share: a voucher on sale in a real PostgreSQL
// store, voucher ids spread apart, and reservations with order ids unique in
// the test binary.
// It is for tests only; nothing in production imports it.
package pgstoretest

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
)

// PriceCents is the price of a voucher from [NewVoucher]: an order's amount
// is its quantity times this.
const PriceCents int64 = 250

// NewVoucher stores a seckill voucher on sale since a minute ago, for an
// hour, with stock units and a per-user limit of limit.
func NewVoucher(t testing.TB, s *pgstore.Store, stock, limit int64) seckill.Voucher {
	t.Helper()
	now := time.Now().UTC()
	v, err := s.CreateVoucher(context.Background(), seckill.Voucher{
		Title: "Test voucher", Kind: seckill.KindSeckill, PriceCents: PriceCents,
		StockTotal: stock, PerUserLimit: limit,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, nil)
	require.NoError(t, err)
	return v
}

// SpreadVoucherIDs makes the vouchers created in pool's database take ids
// from a random point on. Tests that each have a database of their own but
// share one Redis, where a seckill voucher's state is keyed by its id, then
// never meet there.
func SpreadVoucherIDs(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "SELECT setval(pg_get_serial_sequence('vouchers', 'id'), $1, false)",
		1_000_000+rand.Int64N(1<<40))
	require.NoError(t, err)
}

// nextID hands out distinct order ids within one test binary.
var nextID atomic.Int64

// Reservation is a hold of qty units of the voucher for the user, reserved
// now, with an order id no other Reservation of this test binary has.
func Reservation(voucherID, userID, qty int64) seckill.Reservation {
	return seckill.Reservation{
		OrderID: 1_000_000 + nextID.Add(1), VoucherID: voucherID, UserID: userID, Quantity: qty,
		ReservedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
}
