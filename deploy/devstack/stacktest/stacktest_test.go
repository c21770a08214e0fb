package stacktest_test

import (
	"context"
	"testing"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

// TestRedisServerKillRestart is not parallel: it takes the package's Redis
// down.
func TestRedisServerKillRestart(t *testing.T) {
	ctx := t.Context()
	rdb := stack.Redis(t)
	require.NoError(t, rdb.Set(ctx, "stacktest:k", "v", 0).Err())

	pid := stack.RedisServer.Pid()
	stack.RedisServer.Kill()
	require.False(t, devstack.Alive(pid))
	noRetry := redis.NewClient(&redis.Options{Addr: stack.RedisServer.Addr, MaxRetries: -1})
	defer noRetry.Close()
	require.Error(t, noRetry.Ping(ctx).Err())

	require.NoError(t, stack.RedisServer.Restart(ctx))
	require.Equal(t, "redis://"+stack.RedisServer.Addr+"/0", stack.RedisURL, "same address after a restart")
	require.NoError(t, noRetry.Ping(ctx).Err(), "Restart returns once redis answers")
	require.NoError(t, rdb.Ping(ctx).Err(), "old clients reconnect")
}

func TestNewDatabaseIsMigratedAndPrivate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var name string
	t.Run("use", func(t *testing.T) {
		a := stack.NewDatabase(t)
		b := stack.NewDatabase(t)
		require.NoError(t, a.QueryRow(ctx, "SELECT current_database()").Scan(&name))

		var tables int
		require.NoError(t, a.QueryRow(ctx,
			"SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('users', 'vouchers', 'orders')").Scan(&tables))
		require.Equal(t, 3, tables, "the schema is applied")

		_, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)")
		require.NoError(t, err)
		var inB bool
		require.NoError(t, b.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&inB))
		require.False(t, inB, "databases are separate")
	})

	// The subtest's cleanup dropped its databases.
	conn, err := pgx.Connect(ctx, stack.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.False(t, exists, "database %s outlived its test", name)

	var tables int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'orders'").Scan(&tables))
	require.Equal(t, 1, tables, "DatabaseURL is migrated too")
}

func TestNewDatabaseURLSurvivesOpenConnections(t *testing.T) {
	t.Parallel()
	url := stack.NewDatabaseURL(t)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	// Deliberately left open: the drop at cleanup must still succeed.
	_ = conn
}

func TestNewTopic(t *testing.T) {
	t.Parallel()
	topic := stack.NewTopic(t, 4)
	require.Len(t, stack.Kafka.Cluster().PartitionInfos(topic), 4)

	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	p, err := sarama.NewSyncProducer(stack.KafkaBrokers, cfg)
	require.NoError(t, err)
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("hello")})
	require.NoError(t, err)
	require.NotEqual(t, topic, stack.NewTopic(t, 1), "names are unique")
}
