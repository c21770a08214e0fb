package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// everyMethod calls each exported method of s that reads or writes
// PostgreSQL and returns its error by name.
func everyMethod(ctx context.Context, s *pgstore.Store) map[string]error {
	errs := map[string]error{}
	_, errs["CreateUser"] = s.CreateUser(ctx, "nobody", "hash")
	_, errs["UserByName"] = s.UserByName(ctx, "nobody")
	now := time.Now()
	_, errs["CreateVoucher"] = s.CreateVoucher(ctx, seckill.Voucher{
		Title: "t", Kind: seckill.KindLimit, PriceCents: 1, StockTotal: 1, PerUserLimit: 1,
		BeginAt: now, EndAt: now.Add(time.Hour),
	}, nil, nil)
	_, errs["Voucher"] = s.Voucher(ctx, 1)
	_, errs["Vouchers"] = s.Vouchers(ctx)
	_, errs["ActiveSeckillVoucherIDs"] = s.ActiveSeckillVoucherIDs(ctx, now)
	_, errs["Order"] = s.Order(ctx, 1)
	_, errs["OrdersByUser"] = s.OrdersByUser(ctx, 1, 10)
	_, errs["Stats"] = s.Stats(ctx, 1)
	errs["ClearReleasePending"] = s.ClearReleasePending(ctx, []int64{1})
	_, errs["PersistBatch"] = s.PersistBatch(ctx, []seckill.Reservation{pgstoretest.Reservation(1, 1, 1)}, payTimeout)
	_, errs["Pay"] = s.Pay(ctx, 1, 1)
	_, errs["Cancel"] = s.Cancel(ctx, 1, 1)
	_, errs["CancelExpired"] = s.CancelExpired(ctx, 10)
	_, errs["ReleasePending"] = s.ReleasePending(ctx, 10)
	_, _, errs["InsertFailed"] = s.InsertFailed(ctx, pgstoretest.Reservation(1, 1, 1))
	_, errs["OrderExists"] = s.OrderExists(ctx, 1)
	_, errs["BuySync"] = s.BuySync(ctx, pgstoretest.Reservation(1, 1, 1).OrderID, seckill.BuyRequest{VoucherID: 1, UserID: 1, Quantity: 1}, payTimeout)
	_, errs["VoucherOrders"] = s.VoucherOrders(ctx, 1)
	return errs
}

// TestUnreachableIsUnavailable: with nothing listening where the pool
// points, every method's error wraps apperr.ErrUnavailable (the gateway's
// 503) and still carries the driver's connect error.
func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for name, err := range everyMethod(t.Context(), pgstore.New(pool)) {
		require.ErrorIs(t, err, apperr.ErrUnavailable, name)
		_, ok := errors.AsType[*pgconn.ConnectError](err)
		require.True(t, ok, "%s keeps the driver's error: %v", name, err)
	}
}

// TestClosedPoolIsUnavailable: a store whose pool was closed (shutting down)
// answers unavailable from every method.
func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	pool := stack.NewDatabase(t)
	s := pgstore.New(pool)
	_, err := s.Vouchers(t.Context())
	require.NoError(t, err)
	pool.Close()
	for name, err := range everyMethod(t.Context(), s) {
		require.ErrorIs(t, err, apperr.ErrUnavailable, name)
		require.ErrorIs(t, err, puddle.ErrClosedPool, name)
	}
}

// TestDeadlineIsUnavailableCancelIsNot: a deadline that ran out is a
// dependency too slow to answer; a caller that cancelled is not an outage.
func TestDeadlineIsUnavailableCancelIsNot(t *testing.T) {
	t.Parallel()
	s := newStore(t)

	expired, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := s.Vouchers(expired)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Vouchers(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, apperr.ErrUnavailable)
}

// TestTerminatedConnectionIsUnavailable: the server ends the store's
// connection (as a restart or failover does) and the next statement on it
// fails: unavailable, not internal.
func TestTerminatedConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	url := stack.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var pid int32
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid))

	admin, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	var done bool
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT pg_terminate_backend($1, 5000)`, pid).Scan(&done))
	require.True(t, done)

	_, err = pgstore.New(pool).Vouchers(t.Context())
	require.ErrorIs(t, err, apperr.ErrUnavailable)
}

// TestRefusalsKeepTheirMeaning: what the database refuses because of the
// data is not an outage.
func TestRefusalsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)

	_, err := s.CreateUser(ctx, "dora", "hash")
	require.NoError(t, err)
	_, err = s.CreateUser(ctx, "dora", "hash")
	require.ErrorIs(t, err, apperr.ErrUsernameTaken)
	require.NotErrorIs(t, err, apperr.ErrUnavailable)

	_, err = s.Voucher(ctx, 987654321)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	require.NotErrorIs(t, err, apperr.ErrUnavailable)

	v := pgstoretest.NewVoucher(t, s, 1, 1)
	_, err = s.Pay(ctx, 1, 987654321)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	require.NotErrorIs(t, err, apperr.ErrUnavailable)

	// A title PostgreSQL would refuse (NUL) never reaches it.
	now := time.Now()
	_, err = s.CreateVoucher(ctx, seckill.Voucher{
		Title: "a\x00b", Kind: seckill.KindLimit, PriceCents: 1, StockTotal: 1, PerUserLimit: 1,
		BeginAt: now, EndAt: now.Add(time.Hour),
	}, nil, nil)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	require.NotErrorIs(t, err, apperr.ErrUnavailable)

	_, err = s.BuySync(ctx, pgstoretest.Reservation(1, 1, 1).OrderID, seckill.BuyRequest{VoucherID: v.ID, UserID: 1, Quantity: 1}, payTimeout)
	require.ErrorIs(t, err, apperr.ErrInvalidInput, "a seckill voucher is not sold here")
	require.NotErrorIs(t, err, apperr.ErrUnavailable)
}
