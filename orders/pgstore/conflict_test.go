package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// A synchronous buy that PostgreSQL picks as a deadlock's victim is run
// again and succeeds. The deadlock is real: another transaction holds the
// buyer's row and then asks for the voucher's row, which the buy holds
// while it waits for the buyer's row.
func TestDeadlockedBuyIsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 77
	pool, s, v := contended(t, seckill.KindLimit, 5, user)
	deadlocks := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
		return n
	}
	before := deadlocks()

	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(context.Background()) //nolint:errcheck
	// This side looks for deadlocks only after 30 s, so the buy, which
	// looks after the default second, is always the victim.
	_, err = other.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`)
	require.NoError(t, err)
	_, err = other.Exec(ctx, `SELECT 1 FROM voucher_buyers WHERE voucher_id = $1 AND user_id = $2 FOR UPDATE`, v.ID, user)
	require.NoError(t, err)

	type result struct {
		status string
		err    error
	}
	done := make(chan result, 1)
	go func() {
		o, err := s.BuySync(ctx, pgstoretest.Reservation(0, 0, 0).OrderID, seckill.BuyRequest{VoucherID: v.ID, UserID: user, Quantity: 1}, payTimeout)
		done <- result{string(o.Status), err}
	}()
	// Wait until the buy holds the voucher and waits for the buyer's row.
	require.Eventually(t, func() bool {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%voucher_buyers%'`).Scan(&waiting)
		return err == nil && waiting == 1
	}, 20*time.Second, 10*time.Millisecond)
	// Now close the cycle. One of the two is aborted after deadlock_timeout.
	_, err = other.Exec(ctx, `SELECT 1 FROM vouchers WHERE id = $1 FOR UPDATE`, v.ID)
	require.NoError(t, err, "the other transaction gets the voucher's row: the buy was the victim")
	require.NoError(t, other.Rollback(ctx))

	r := <-done
	require.NoError(t, r.err, "the buy is run again after the deadlock")
	require.Equal(t, "created", r.status)
	require.Greater(t, deadlocks(), before, "PostgreSQL did detect a deadlock")
	var left int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT stock_left FROM vouchers WHERE id = $1`, v.ID).Scan(&left))
	require.EqualValues(t, 9, left, "bought once, whatever the attempts")
}

// A buy that keeps losing is answered 503 unavailable (ErrUnavailable, with
// the gateway's Retry-After), never 500. The conflicts are real: another
// transaction keeps the buyer's row all along and, each time the buy waits
// for it, asks for the voucher's row, which the buy holds: a deadlock the
// buy loses. A savepoint gives the voucher's row back after each round.
func TestEndlessDeadlocksAreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const user = 78
	pool, s, v := contended(t, seckill.KindCommon, 1, user)

	other, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer other.Rollback(context.Background()) //nolint:errcheck
	_, err = other.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`)
	require.NoError(t, err)
	_, err = other.Exec(ctx, `SELECT 1 FROM voucher_buyers WHERE voucher_id = $1 AND user_id = $2 FOR UPDATE`, v.ID, user)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := s.BuySync(ctx, pgstoretest.Reservation(0, 0, 0).OrderID, seckill.BuyRequest{VoucherID: v.ID, UserID: user, Quantity: 1}, payTimeout)
		done <- err
	}()
	rounds := 0
	for {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%voucher_buyers%'`).Scan(&n))
		if n == 1 { // the buy holds the voucher and waits for the buyer's row
			_, err = other.Exec(ctx, `SAVEPOINT round`)
			require.NoError(t, err)
			_, err = other.Exec(ctx, `SELECT 1 FROM vouchers WHERE id = $1 FOR UPDATE`, v.ID)
			require.NoError(t, err, "the buy is the deadlock's victim")
			_, err = other.Exec(ctx, `ROLLBACK TO SAVEPOINT round`) // the voucher's row back, the buyer's kept
			require.NoError(t, err)
			rounds++
		}
		select {
		case err := <-done:
			require.ErrorIs(t, err, apperr.ErrUnavailable)
			require.Contains(t, err.Error(), "deadlock")
			require.Contains(t, err.Error(), "gave up after 4 attempts", "every attempt deadlocked")
			// Each round causes one deadlock, or two: when the buy's
			// attempt is aborted, its next attempt may lock the voucher's
			// row before the woken round does (PostgreSQL does not queue
			// row-lock waiters after the holder aborts) and deadlock with
			// the round's still-waiting lock at once.
			require.GreaterOrEqual(t, rounds, 2)
			require.LessOrEqual(t, rounds, 4)
			require.NoError(t, other.Rollback(ctx))
			var left int64
			require.NoError(t, pool.QueryRow(ctx, `SELECT stock_left FROM vouchers WHERE id = $1`, v.ID).Scan(&left))
			require.EqualValues(t, 10, left, "nothing of the lost attempts is kept")
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// contended returns a store on a database of its own with a voucher on sale
// of kind and limit, and user's buyer row already there (quantity 0), so
// that another transaction can lock that row before a buy asks for it.
func contended(t *testing.T, kind seckill.Kind, limit, user int64) (*pgxpool.Pool, *pgstore.Store, seckill.Voucher) {
	t.Helper()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	s := pgstore.New(pool)
	now := time.Now().UTC()
	v, err := s.CreateVoucher(ctx, seckill.Voucher{
		Title: "contended", Kind: kind, PriceCents: 100, StockTotal: 10, PerUserLimit: limit,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO voucher_buyers (voucher_id, user_id, quantity) VALUES ($1, $2, 0)`, v.ID, user)
	require.NoError(t, err)
	return pool, s, v
}
