package systemtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/gateway/edge"
)

// TestInstanceThatCannotBindNeverJoinsTheFleet: a second `seckill serve`
// given the first one's port fails to start, and the first one's share of
// the global limit never changes. The gateways count themselves in Redis
// (edge.FleetKey) and each enforces 1/N of SECKILL_GLOBAL_RATE; a second
// instance used to heartbeat before it tried to bind, so the running
// gateway counted two and halved its share until the dead one went stale.
// The fleet is alone on a Redis of its own, so that nothing else counts.
func TestInstanceThatCannotBindNeverJoinsTheFleet(t *testing.T) {
	// This test is serial (main_test.go): `seckill serve` sets sarama's and go-redis's package loggers, which every system of this process reads.
	r, err := devstack.StartRedis(t.Context(), devstack.RedisOptions{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	t.Cleanup(func() { _ = rdb.Close() })

	first := startSystem(t, map[string]string{"SECKILL_REDIS_URL": r.URL})
	share := func() float64 {
		return metric(t, first.scrape(t), "seckill_gateway_instances").GetGauge().GetValue()
	}
	require.Equal(t, 1.0, share())
	members, err := rdb.ZRangeWithScores(t.Context(), edge.FleetKey, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 1, "the first instance has joined")
	firstID := members[0].Member.(string)

	// The second instance: the same configuration, the first one's port.
	second := map[string]string{
		"SECKILL_HTTP_ADDR":     first.cfg.HTTPAddr,
		"SECKILL_OPS_ADDR":      freeAddr(t),
		"SECKILL_REDIS_URL":     r.URL,
		"SECKILL_DATABASE_URL":  first.cfg.DatabaseURL,
		"SECKILL_KAFKA_BROKERS": strings.Join(first.cfg.KafkaBrokers, ","),
		"SECKILL_KAFKA_TOPIC":   first.cfg.KafkaTopic,
		"SECKILL_JWT_SECRET":    first.cfg.JWTSecret,
		"SECKILL_ADMIN_TOKEN":   first.cfg.AdminToken,
		"SECKILL_LOG_LEVEL":     "error",
	}
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = app.Run(ctx, []string{"serve"}, func(k string) string { return second[k] }, &stdout, &stderr)
	require.ErrorContains(t, err, "SECKILL_HTTP_ADDR", "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
	require.Equal(t, 1, app.ExitCode(err))

	n, err := rdb.ZCard(t.Context(), edge.FleetKey).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the instance that failed to bind never heartbeat")

	// The first instance recounts at each of its beats (every second). A
	// member that stopped beating is dropped after three: until the first
	// one has beaten past that window, its count must stay 1 at every read.
	now, err := rdb.Time(t.Context()).Result()
	require.NoError(t, err)
	until := float64(now.Add(4 * time.Second).UnixMilli())
	seen := map[float64]int{}
	require.Eventually(t, func() bool {
		seen[share()]++
		score, err := rdb.ZScore(t.Context(), edge.FleetKey, firstID).Result()
		return err == nil && score > until
	}, 60*time.Second, 50*time.Millisecond, "the first instance stopped beating")
	seen[share()]++
	require.Len(t, seen, 1, "the first instance's count of instances at every read: %v", seen)
	require.Contains(t, seen, 1.0)
}
