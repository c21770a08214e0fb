package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/migrations"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

// The schema applies again without change, and its constraints refuse
// oversell and duplicate orders by themselves, whatever the code above does.
func TestSchemaRefusesOversellAndDuplicates(t *testing.T) {
	url := stack.NewDatabaseURL(t)
	require.NoError(t, migrations.ApplyURL(t.Context(), url), "applying twice is a no-op")
	pool := stack.NewDatabase(t)
	ctx := t.Context()

	var vid int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO vouchers (title, kind, price_cents, stock_total, stock_left,
		per_user_limit, begin_at, end_at) VALUES ('t', 'seckill', 100, 2, 2, 1, now(), now() + interval '1 hour') RETURNING id`).Scan(&vid))

	violates := func(sql string, args ...any) string {
		_, err := pool.Exec(ctx, sql, args...)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		return pgErr.Code
	}
	require.Equal(t, "23514", violates(`UPDATE vouchers SET stock_left = stock_left - 3 WHERE id = $1`, vid), "stock never below zero")
	require.Equal(t, "23514", violates(`UPDATE vouchers SET stock_left = 3 WHERE id = $1`, vid), "never above the total")

	insert := `INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, request_key, reserved_at, pay_deadline)
		VALUES ($1, $2, 7, 1, 100, 'created', $3, now(), now() + interval '15 minutes')`
	_, err := pool.Exec(ctx, insert, 1, vid, "k")
	require.NoError(t, err)
	require.Equal(t, "23505", violates(insert, 1, vid, "other"), "one row per order id")
	require.Equal(t, "23505", violates(insert, 2, vid, "k"), "one order per (user, voucher, request key)")
	_, err = pool.Exec(ctx, insert, 3, vid, nil)
	require.NoError(t, err, "orders without a key do not collide")
	require.Equal(t, "23514", violates(`INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, reserved_at)
		VALUES (4, $1, 7, 1, 100, 'created', now())`, vid), "a created order has a pay deadline")
}
