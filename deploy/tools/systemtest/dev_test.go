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
	for _, shards := range []string{"1", "3"} {
		t.Run("shards="+shards, func(t *testing.T) { testDevMode(t, map[string]string{"SECKILL_DEV_REDIS_SHARDS": shards}) })
	}
}

// TestDevModeOnApacheKafka is `SECKILL_DEV_KAFKA=apache
// SECKILL_DEV_KAFKA_BROKERS=3 make run`: the same sale on three real Apache
// Kafka brokers, their data under the data folder.
func TestDevModeOnApacheKafka(t *testing.T) {
	testDevMode(t, map[string]string{"SECKILL_DEV_KAFKA": "apache", "SECKILL_DEV_KAFKA_BROKERS": "3"})
}

func testDevMode(t *testing.T, extra map[string]string) {
	dataDir := t.TempDir()
	addr := freeAddr(t)
	env := map[string]string{
		"SECKILL_HTTP_ADDR": addr,
		"SECKILL_DATA_DIR":  dataDir,
		"SECKILL_LOG_LEVEL": "warn",
	}
	maps.Copy(env, extra)
	shards := cmp.Or(env["SECKILL_DEV_REDIS_SHARDS"], "1")
	apache := env["SECKILL_DEV_KAFKA"] == "apache"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testlog.Buffer
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, []string{"dev"}, func(k string) string { return env[k] }, &stdout, &stderr)
	}()

	ts := &testSystem{base: "http://" + addr, client: apiClient(t, "http://"+addr, 2)}
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			t.Fatalf("dev mode stopped early: %v\nstderr:\n%s", err, stderr.String())
		default:
		}
		resp, err := ts.client.Get(ts.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 90*time.Second, 100*time.Millisecond, "dev mode never became ready\nstderr:\n%s", &stderr)
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

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "stderr:\n%s", stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("dev mode did not stop within 60s of SIGTERM")
	}
	require.Empty(t, processesUsing(t, dataDir), "child processes left behind")
	require.NoFileExists(t, devEnv, "its secrets do not outlive the run")
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
