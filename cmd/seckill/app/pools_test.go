package app

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// The gateway and the workers have pools of their own, sized by their
// variables: with every connection of the gateway's pool taken (a read
// flood), a worker still persists a reservation at once.
func TestWorkersKeepTheirConnectionsUnderAReadFlood(t *testing.T) {
	// The in-process broker: the test checks the pools, nothing of Kafka.
	brokers, topic := strings.Join(stack.KafkaBrokers, ","), stack.NewTopic(t, 1)
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{
			"SECKILL_REDIS_URL": stack.RedisURL, "SECKILL_DATABASE_URL": stack.NewDatabaseURL(t),
			"SECKILL_KAFKA_BROKERS": brokers, "SECKILL_KAFKA_TOPIC": topic, "SECKILL_ROLES": "worker",
			"SECKILL_DB_GATEWAY_CONNS": "3", "SECKILL_DB_WORKER_CONNS": "2",
		}[k]
	})
	require.NoError(t, err)
	sys, err := NewSystem(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	require.EqualValues(t, 3, sys.pool.Config().MaxConns)
	require.EqualValues(t, 2, sys.workPool.Config().MaxConns)
	require.NotSame(t, sys.pool, sys.workPool)

	v, err := sys.store.CreateVoucher(t.Context(), seckill.Voucher{
		Title: "pools", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10, StockLeft: 10, PerUserLimit: 1,
		BeginAt: time.Now().Add(-time.Minute), EndAt: time.Now().Add(time.Hour),
	}, nil, nil)
	require.NoError(t, err)

	// The flood: every gateway connection held.
	var held []*pgxpool.Conn
	for range 3 {
		c, err := sys.pool.Acquire(t.Context())
		require.NoError(t, err)
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = sys.pool.Acquire(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the gateway's pool is exhausted")

	// Generous: this is about not waiting forever, not about speed.
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := sys.workStore.PersistBatch(ctx, []seckill.Reservation{{
		OrderID: rand.Int64N(1<<50) + 1, VoucherID: v.ID, UserID: 7, Quantity: 1, ReservedAt: time.Now(),
	}}, time.Minute)
	require.NoError(t, err, "the workers' pool is their own")
	require.Equal(t, 1, res.Count(orders.OutcomeCreated))
}

// A transaction of the workers' pool left waiting on its client (a worker
// whose link to PostgreSQL went silent) is ended by the server after
// SECKILL_DB_WORKER_IDLE_TX_TIMEOUT, and its locks with it; the gateway's
// pool keeps the server's setting.
func TestWorkerTransactionLeftIdleIsEndedByTheServer(t *testing.T) {
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{
			"SECKILL_REDIS_URL": stack.RedisURL, "SECKILL_DATABASE_URL": stack.NewDatabaseURL(t),
			"SECKILL_KAFKA_BROKERS": strings.Join(stack.KafkaBrokers, ","), "SECKILL_ROLES": "worker",
			"SECKILL_DB_WORKER_IDLE_TX_TIMEOUT": "1s",
		}[k]
	})
	require.NoError(t, err)
	require.Equal(t, time.Second, cfg.DBWorkerIdleTx)
	sys, err := NewSystem(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	ctx := t.Context()

	var setting string
	require.NoError(t, sys.workPool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&setting))
	require.Equal(t, "1s", setting)
	require.NoError(t, sys.pool.QueryRow(ctx, "SHOW idle_in_transaction_session_timeout").Scan(&setting))
	require.Equal(t, "0", setting)

	tx, err := sys.workPool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid int32
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	require.Eventually(t, func() bool {
		var n int
		err := sys.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return err == nil && n == 0
	}, 30*time.Second, 100*time.Millisecond, "the idle transaction's session is still open")
	_, err = tx.Exec(ctx, "SELECT 1")
	require.Error(t, err, "the transaction the server ended still runs statements")
}
