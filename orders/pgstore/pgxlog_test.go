package pgstore_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill/tracing"
)

// A username taken twice fails on the users table's unique constraint,
// which the store turns into the shopper's answer: pgx's log line about
// it is no error, and it never carries the statement's values (here the
// password's hash).
func TestPgxLogKeepsValuesOut(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(stack.NewDatabaseURL(t))
	require.NoError(t, err)
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.ConnConfig.Tracer = tracing.PgxTracer(nil, log)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := pgstore.New(pool)

	const hash = "$2a$10$secret-hash-of-a-password-1234567890"
	_, err = store.CreateUser(t.Context(), "ada_lovelace", hash)
	require.NoError(t, err)
	_, err = store.CreateUser(t.Context(), "ada_lovelace", hash)
	require.Error(t, err, "the username is taken")

	logged := out.String()
	require.Contains(t, logged, "23505", "pgx's line about the refused insert is written")
	require.NotContains(t, logged, "secret-hash", "no statement's values in the log")
	require.NotContains(t, logged, `"level":"ERROR"`, "a constraint the store answers is no database error")
}
