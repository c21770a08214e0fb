package systemtest

import (
	"cmp"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
	"github.com/flashsale/seckill/seckill/testlog"
)

// TestDevMode is `make run`: with nothing configured, `seckill dev` starts
// its own Redis, PostgreSQL and Kafka, seeds a voucher on sale, sells it over
// HTTP, and on shutdown leaves no process behind. It runs on both shapes of
// Redis: one redis-server, and `SECKILL_DEV_REDIS_SHARDS=3 make run`'s
// private Redis Cluster of three masters.
func TestDevMode(t *testing.T) {
	// This test is serial (main_test.go): `seckill dev` sets sarama's and go-redis's package loggers, which every system of this process reads.
	for _, shards := range []string{"1", "3"} {
		t.Run("shards="+shards, func(t *testing.T) { testDevMode(t, map[string]string{"SECKILL_DEV_REDIS_SHARDS": shards}) })
	}
}

// TestDevModeOnApacheKafka is `SECKILL_DEV_KAFKA=apache
// SECKILL_DEV_KAFKA_BROKERS=3 make run`: the same sale on three real Apache
// Kafka brokers, their data under the data folder.
func TestDevModeOnApacheKafka(t *testing.T) {
	// This test is serial (main_test.go): `seckill dev` sets sarama's and go-redis's package loggers, which every system of this process reads.
	testDevMode(t, map[string]string{"SECKILL_DEV_KAFKA": "apache", "SECKILL_DEV_KAFKA_BROKERS": "3"})
}

// devRun is `seckill dev` running in the test's process, as `make run`
// starts it: its data folder, its banner and log, and its end.
type devRun struct {
	ts             *testSystem
	dataDir        string
	stdout, stderr *testlog.Buffer
	cancel         context.CancelFunc
	done           chan error
}

// startDev runs `seckill dev` on a free port and a data folder of its own,
// with env's settings besides, until it is ready and its banner printed.
func startDev(t *testing.T, env map[string]string) *devRun {
	t.Helper()
	d := &devRun{dataDir: t.TempDir(), stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, done: make(chan error, 1)}
	addr := freeAddr(t)
	vars := map[string]string{
		"SECKILL_HTTP_ADDR": addr,
		"SECKILL_DATA_DIR":  d.dataDir,
		"SECKILL_LOG_LEVEL": "warn",
	}
	maps.Copy(vars, env)
	var ctx context.Context
	ctx, d.cancel = context.WithCancel(context.Background())
	t.Cleanup(d.cancel)
	go func() {
		d.done <- app.Run(ctx, []string{"dev"}, func(k string) string { return vars[k] }, d.stdout, d.stderr)
	}()

	d.ts = &testSystem{base: "http://" + addr, client: apiClient(t, "http://"+addr, 2)}
	require.Eventually(t, func() bool {
		select {
		case err := <-d.done:
			t.Fatalf("dev mode stopped early: %v\nstderr:\n%s", err, d.stderr.String())
		default:
		}
		resp, err := d.ts.client.Get(d.ts.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Contains(d.stdout.String(), "press Ctrl-C to stop")
	}, 90*time.Second, 100*time.Millisecond, "dev mode never became ready\nstderr:\n%s", d.stderr)
	return d
}

// stop ends dev mode as Ctrl-C does and waits for it: it must stop cleanly,
// leaving no child process behind.
func (d *devRun) stop(t *testing.T) {
	t.Helper()
	d.cancel()
	select {
	case err := <-d.done:
		require.NoError(t, err, "stderr:\n%s", d.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("dev mode did not stop within 60s of SIGTERM")
	}
	require.Empty(t, processesUsing(t, d.dataDir), "child processes left behind")
}

func testDevMode(t *testing.T, extra map[string]string) {
	shards := cmp.Or(extra["SECKILL_DEV_REDIS_SHARDS"], "1")
	apache := extra["SECKILL_DEV_KAFKA"] == "apache"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := startDev(t, extra)
	ts, dataDir, stdout := d.ts, d.dataDir, d.stdout
	require.Contains(t, stdout.String(), "admin token", "a generated admin token is shown once")
	banner := regexp.MustCompile(`metrics (http://\S+/metrics)`).FindStringSubmatch(stdout.String())
	require.NotNil(t, banner, "the banner says where the metrics are: %s", stdout.String())
	resp, err := ts.client.Get(banner[1])
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(metrics), "\nseckill_", "the ops listener serves the process's series")

	reg := ts.do(t, http.MethodPost, "/api/v1/users", "", map[string]any{"username": "alice", "password": "correct horse"}, nil)
	require.Equal(t, http.StatusCreated, reg.status, "%s", reg.raw)
	login := ts.do(t, http.MethodPost, "/api/v1/sessions", "", map[string]any{"username": "alice", "password": "correct horse"}, nil)
	require.Equal(t, http.StatusOK, login.status, "%s", login.raw)
	token := login.body["token"].(string)

	vs := ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil)
	require.Equal(t, http.StatusOK, vs.status)
	require.NotEmpty(t, vs.list, "dev mode seeds a demo voucher")
	demo := vs.list[0]
	require.Equal(t, "seckill", demo["kind"])

	bought := ts.buy(t, demo["id"].(string), token, 1, "first-click")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	orderID := bought.body["order_id"].(string)
	require.Eventually(t, func() bool {
		o := ts.do(t, http.MethodGet, "/api/v1/orders/"+orderID, token, nil, nil)
		return o.status == http.StatusOK && o.body["status"] == "created"
	}, 30*time.Second, 50*time.Millisecond, "the order never reached PostgreSQL")

	nodes, err := filepath.Glob(filepath.Join(dataDir, "redis-cluster", "node-*", "nodes.conf"))
	require.NoError(t, err)
	if shards == "1" {
		require.Empty(t, nodes, "one plain redis-server")
		require.FileExists(t, filepath.Join(dataDir, "redis", "redis.log"))
	} else {
		require.Len(t, nodes, 3, "a cluster of three masters, its files under the data folder")
		require.NoDirExists(t, filepath.Join(dataDir, "redis"))
	}

	kafkaLogs, err := filepath.Glob(filepath.Join(dataDir, "kafka-apache", "node-*", "kafka.log"))
	require.NoError(t, err)
	if apache {
		require.Contains(t, stdout.String(), "kafka: Apache Kafka", "the banner says which broker runs")
		require.Len(t, kafkaLogs, 3, "three brokers, their files under the data folder")
	} else {
		require.Contains(t, stdout.String(), "kafka: in-process broker", "the banner says which broker runs")
		require.Empty(t, kafkaLogs)
	}

	for _, path := range []string{"/", "/admin"} {
		page := ts.do(t, http.MethodGet, path, "", nil, nil)
		require.Equal(t, http.StatusOK, page.status, path)
		require.Contains(t, string(page.raw), "<html", "%s serves a page", path)
	}

	// The banner names the spec, and how to point the load tool at this
	// run: its generated secrets are in the data folder's dev.env.
	require.Contains(t, stdout.String(), "API spec "+ts.base+"/openapi.yaml")
	require.Contains(t, stdout.String(), "JWT secret (generated for this run")
	require.Contains(t, stdout.String(), "bin/loadtest sale -data-dir "+dataDir)
	devEnv := filepath.Join(dataDir, "dev.env")
	info, err := os.Stat(devEnv)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "it holds secrets")
	if shards == "1" && !apache {
		// The load tool as the banner says, with nothing in its environment.
		var ltOut, ltErr testlog.Buffer
		cfg, err := loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-data-dir", dataDir, "-shoppers", "20", "-attempts", "2", "-stock", "10",
			"-limit", "1", "-open-in", "1s", "-first-user", "41000000", "-no-progress", "-json"},
			func(string) string { return "" })
		require.NoError(t, err)
		_, err = loadtest.Run(ctx, cfg, &ltOut, &ltErr)
		require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", &ltOut, &ltErr)
		require.Contains(t, ltErr.String(), "read from "+devEnv)
		require.Contains(t, ltOut.String(), `"sold": 10`)
	}

	d.stop(t)
	require.NoFileExists(t, devEnv, "its secrets do not outlive the run")
}

// TestBannerLoadTestMeasuresTheSale is a newcomer's first hour: the load
// tool's command line as the banner of a default `make run` prints it, run
// as printed, sells honestly (PASSED) and measures the sale, not the
// limiter. Its whole crowd connects from 127.0.0.1, whose per-address buy
// limit of 50/s would refuse nearly every buy (429) and then the checks'
// own reads; each shopper names an address of its own in X-Forwarded-For,
// which dev mode believes from loopback (README, CONFIG.md).
func TestBannerLoadTestMeasuresTheSale(t *testing.T) {
	// This test is serial (main_test.go): `seckill dev` sets sarama's and go-redis's package loggers, which every system of this process reads.
	d := startDev(t, nil)
	defer d.stop(t)
	line := regexp.MustCompile(`(?m)^load test: (.+?)\s{2,}\(reads`).FindStringSubmatch(d.stdout.String())
	require.NotNil(t, line, "the banner names the load tool's command line:\n%s", d.stdout)
	args := strings.Fields(line[1])
	require.GreaterOrEqual(t, len(args), 2, "%q", line[1])
	require.Equal(t, "bin/loadtest", args[0], "make build's load tool")

	// As cmd/loadtest runs it: the scenario, then its flags, with nothing
	// in the environment (a newcomer has set nothing).
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cfg, err := loadtest.ParseFlags(loadtest.Scenario(args[1]), args[2:], func(string) string { return "" })
	require.NoError(t, err, "%q", line[1])
	var stdout, stderr testlog.Buffer
	rep, err := loadtest.Run(ctx, cfg, &stdout, &stderr)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	t.Logf("the banner's load test:\n%s", &stdout)
	require.True(t, rep.Passed)
	require.Contains(t, stdout.String(), "PASSED")
	require.True(t, rep.ShopperAddresses)
	require.Equal(t, rep.Planned, rep.Sent, "the whole crowd was sent")
	require.Equal(t, rep.Stock, rep.Sold, "the crowd asks for far more than the stock: it sells out")
	limited := rep.Outcomes[loadtest.OutcomeRateLimited]
	require.Less(t, float64(limited), 0.05*float64(rep.Sent), "%d of %d answers were 429: the limiter was measured, not the sale", limited, rep.Sent)
}

// processesUsing lists the command lines of processes that mention dir.
func processesUsing(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := strings.ReplaceAll(string(cmdline), "\x00", " ")
		if strings.Contains(s, dir) {
			found = append(found, e.Name()+": "+s)
		}
	}
	return found
}

// TestTakenPortFailsFastAndCleanly: the likeliest start-up failure says what
// to do and leaves nothing running (no child process, no retrying hub).
func TestTakenPortFailsFastAndCleanly(t *testing.T) {
	// This test is serial (main_test.go): `seckill dev` sets sarama's and go-redis's package loggers, which every system of this process reads.
	for _, variable := range []string{"SECKILL_HTTP_ADDR", "SECKILL_OPS_ADDR"} {
		t.Run(variable, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			defer taken.Close()
			dataDir := t.TempDir()
			env := map[string]string{
				"SECKILL_HTTP_ADDR":    freeAddr(t),
				"SECKILL_DATA_DIR":     dataDir,
				"SECKILL_LOG_LEVEL":    "warn",
				"SECKILL_DEMO_VOUCHER": "false",
			}
			env[variable] = taken.Addr().String()
			var stdout, stderr testlog.Buffer
			start := time.Now()
			err = app.Run(context.Background(), []string{"dev"}, func(k string) string { return env[k] }, &stdout, &stderr)
			require.Error(t, err)
			require.Contains(t, err.Error(), variable, "the error names the setting to change")
			require.Less(t, time.Since(start), 60*time.Second)
			require.NotContains(t, stdout.String(), "seckill is running", "no banner for a process that never served")
			require.Empty(t, processesUsing(t, dataDir), "child processes left behind")
			time.Sleep(300 * time.Millisecond)
			require.NotContains(t, stderr.String(), "subscribe failed", "nothing keeps retrying after run returned")
		})
	}
}
