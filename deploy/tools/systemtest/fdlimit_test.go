package systemtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/deploy/tools/fleet"
)

// startProcess runs `seckill serve` (every role) as a process of its own on
// the package's services, with the shipped per-address caps, so that its
// open-file limit can be lowered without touching the test's. It returns
// the process and its ops listener's address, where /metrics is served.
func startProcess(t *testing.T) (*fleet.Process, string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin, err := fleet.Build(ctx, dir)
	require.NoError(t, err)
	addr, opsAddr := freeAddr(t), freeAddr(t)
	env := map[string]string{
		"SECKILL_HTTP_ADDR":     addr,
		"SECKILL_OPS_ADDR":      opsAddr,
		"SECKILL_REDIS_URL":     stack.RedisURL,
		"SECKILL_DATABASE_URL":  stack.NewDatabaseURL(t),
		"SECKILL_KAFKA_BROKERS": stack.KafkaBrokers[0],
		"SECKILL_KAFKA_TOPIC":   stack.NewTopic(t, 6),
		"SECKILL_KAFKA_GROUP":   "g-" + strconv.FormatInt(rand.Int64(), 36),
		"SECKILL_JWT_SECRET":    "test-secret-0123456789abcdefghijklmnopqrstuvwxyz-" + strconv.FormatInt(rand.Int64(), 36),
		"SECKILL_ADMIN_TOKEN":   "admin-" + strconv.FormatInt(rand.Int64(), 36),
	}
	p := fleet.NewProcess("seckill", bin, dir, []string{"serve"}, env)
	require.NoError(t, p.Start(ctx, 2*time.Minute))
	t.Cleanup(func() {
		p.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("%s ends with:\n%s", p.LogPath, fleet.Tail(p.LogPath))
		}
	})
	return p, opsAddr
}

// metricSum is the sum of every series of a metric family on /metrics.
func metricSum(t *testing.T, addr, name string) float64 {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^`+name+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// TestDescriptorExhaustionKeepsTheProcess: the process's open-file limit is
// lowered to 700 under it. 900 idle connections from 127.0.0.2 are held to
// SECKILL_CONNS_PER_ADDR, and 127.0.0.3 is served all along; then 1,250
// from five more addresses, each within its cap, use up every descriptor:
// the process waits it out and says what to do, a kept-alive connection is
// still answered, and once the flood closes new connections are served and
// the dependencies are ready again. The process used to exit with
// `accept4: too many open files`.
func TestDescriptorExhaustionKeepsTheProcess(t *testing.T) {
	t.Parallel()
	p, opsAddr := startProcess(t)
	ctx := t.Context()
	log, err := os.ReadFile(p.LogPath)
	require.NoError(t, err)
	require.Contains(t, string(log), "connections capped below the open-file limit", "the caps are logged at start")

	kept, err := stacktest.DialFrom(ctx, "127.0.0.3", p.Addr)
	require.NoError(t, err)
	defer kept.Close()
	require.True(t, stacktest.Healthz(kept))
	old, err := stacktest.SetOpenFileLimit(p.Pid(), 700)
	require.NoError(t, err)
	defer func() { _, _ = stacktest.SetOpenFileLimit(p.Pid(), old) }()

	// One address: its connections past the cap are closed at once.
	flood := stacktest.OpenFlood(ctx, "127.0.0.2", p.Addr, 900, func(tried int) {
		if tried%150 == 0 {
			require.False(t, p.Exited(), "the process exited after %d connections", tried)
			require.True(t, stacktest.HealthzFrom(ctx, "127.0.0.3", p.Addr), "127.0.0.3 is answered after %d connections of 127.0.0.2", tried)
		}
	})
	require.Eventually(t, func() bool {
		return metricSum(t, opsAddr, "seckill_gateway_connections_refused_total") >= float64(900-gatewayDefaultPerAddr(t))
	}, 30*time.Second, 100*time.Millisecond, "the connections past the cap are closed (%d dials failed)", flood.Failed)
	t.Logf("127.0.0.2: %d dials completed, %d reset; refused so far %v", len(flood.Open), flood.Failed,
		metricSum(t, opsAddr, "seckill_gateway_connections_refused_total"))
	flood.Close()

	// Several addresses, each within its cap: every descriptor is used.
	var floods []*stacktest.Flood
	for i := range 5 {
		floods = append(floods, stacktest.OpenFlood(ctx, fmt.Sprintf("127.0.0.%d", 4+i), p.Addr, 250, nil))
	}
	require.Eventually(t, func() bool {
		log, _ := os.ReadFile(p.LogPath)
		return strings.Contains(string(log), "accept4: too many open files")
	}, 30*time.Second, 100*time.Millisecond, "the descriptors ran out")
	require.False(t, p.Exited(), "the process waits out too many open files")
	require.True(t, stacktest.Healthz(kept), "a kept-alive connection is answered while no descriptor is free")
	for _, f := range floods {
		f.Close()
	}
	require.Eventually(t, func() bool { return stacktest.HealthzFrom(ctx, "127.0.0.3", p.Addr) },
		30*time.Second, 100*time.Millisecond, "new connections are served once the flood is gone")
	require.Eventually(t, func() bool { return fleet.Ready(ctx, p.Addr) },
		30*time.Second, 100*time.Millisecond, "Redis, PostgreSQL and Kafka are ready again")
	require.False(t, p.Exited())
	require.Positive(t, metricSum(t, opsAddr, "seckill_gateway_accept_errors_total"), "accept errors were waited out")
	t.Logf("five addresses: %d connections; accept errors waited out: %v", 5*250,
		metricSum(t, opsAddr, "seckill_gateway_accept_errors_total"))
	log, err = os.ReadFile(p.LogPath)
	require.NoError(t, err)
	require.Contains(t, string(log), "ulimit -n", "the log says what to do")
	require.NotContains(t, string(log), "level=ERROR msg=\"seckill: gateway", "the gateway never stopped")
}

// gatewayDefaultPerAddr is SECKILL_CONNS_PER_ADDR's default.
func gatewayDefaultPerAddr(t *testing.T) int {
	cfg, err := app.LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	return cfg.ConnsPerAddr
}
