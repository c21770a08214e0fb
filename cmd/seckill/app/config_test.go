package app

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

func TestConfigDefaultsAndParsing(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, 15*time.Minute, cfg.PayTimeout)
	require.Equal(t, []string{"gateway", "worker", "sweeper"}, cfg.Roles)
	require.Equal(t, seckill.DefaultStateGrace, cfg.StateGrace, "SECKILL_STATE_GRACE's default is the packages' one")
	require.Equal(t, salereport.DefaultRetention, cfg.SaleCountsKeep, "SECKILL_SALE_COUNTS_RETENTION's default is the package's one")

	env := map[string]string{
		"SECKILL_PAY_TIMEOUT":   "3s",
		"SECKILL_KAFKA_BROKERS": " a:1, b:2 ,",
		"SECKILL_ROLES":         "worker",
		"SECKILL_DEMO_VOUCHER":  "false",
	}
	cfg, err = LoadConfig(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.PayTimeout)
	require.Equal(t, []string{"a:1", "b:2"}, cfg.KafkaBrokers)
	require.True(t, cfg.HasRole(RoleWorker))
	require.False(t, cfg.HasRole(RoleGateway))
	require.False(t, cfg.DemoVoucher)

	for k, v := range map[string]string{
		"SECKILL_PAY_TIMEOUT": "15", "SECKILL_USER_RATE": "fast", "SECKILL_ROLES": "gateway,cashier",
		"SECKILL_GLOBAL_RATE": "0", "SECKILL_DEMO_VOUCHER": "maybe", "SECKILL_SALE_COUNTS_RETENTION": "30m",
	} {
		_, err := LoadConfig(func(key string) string {
			if key == k {
				return v
			}
			return ""
		})
		require.Error(t, err, "%s=%s", k, v)
		require.Contains(t, err.Error(), k, "the error names the variable")
	}
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	env := map[string]string{
		"SECKILL_JWT_SECRET":   "super-secret-jwt-key",
		"SECKILL_ADMIN_TOKEN":  "super-secret-admin",
		"SECKILL_DATABASE_URL": "postgres://app:hunter2@db:5432/seckill",
	}
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	require.NoError(t, err)
	var printed strings.Builder
	for _, kv := range cfg.printable() {
		printed.WriteString(kv[0] + "=" + kv[1] + "\n")
	}
	for _, secret := range []string{"super-secret-jwt-key", "super-secret-admin", "hunter2"} {
		require.NotContains(t, printed.String(), secret)
	}
	require.Contains(t, printed.String(), "postgres://app:****@db:5432/seckill", "the server stays visible")
}

// TestConfigDocListsEveryVariable keeps the configuration table of
// CONFIG.md in step with Config.
func TestConfigDocListsEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("../CONFIG.md")
	require.NoError(t, err)
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		name := typ.Field(i).Tag.Get("env")
		require.Contains(t, string(doc), "`"+name+"`", "cmd/seckill/CONFIG.md's configuration table lacks %s (run `seckill env`)", name)
	}
}

// TestRedisClusterConfig: seed nodes or one URL, the password masked when
// printed, and a dev cluster only of a size Redis Cluster accepts.
func TestRedisClusterConfig(t *testing.T) {
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"SECKILL_REDIS_CLUSTER_ADDRS": " 10.0.0.1:6379, 10.0.0.2:6379 ,"}[k]
	})
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1:6379", "10.0.0.2:6379"}, cfg.RedisCluster)
	require.Equal(t, 1, cfg.DevRedisShards)
	opts, err := clusterOptions(cfg.RedisCluster)
	require.NoError(t, err)
	require.Equal(t, cfg.RedisCluster, opts.Addrs)
	require.Equal(t, clusterStateReload, opts.ClusterStateReloadInterval, "the slot map is read again soon after a failover")

	opts, err = clusterOptions([]string{"redis://app:s3cret@10.0.0.1:6379?addr=10.0.0.2:6379"})
	require.NoError(t, err)
	require.Equal(t, []string{"10.0.0.1:6379", "10.0.0.2:6379"}, opts.Addrs)
	require.Equal(t, "s3cret", opts.Password)
	cfg.RedisCluster = []string{"redis://app:s3cret@10.0.0.1:6379?addr=10.0.0.2:6379"}
	for _, kv := range cfg.printable() {
		if kv[0] == "SECKILL_REDIS_CLUSTER_ADDRS" {
			require.Equal(t, "redis://app:****@10.0.0.1:6379?addr=10.0.0.2:6379", kv[1])
		}
	}
	_, err = clusterOptions([]string{"10.0.0.1:6379", "redis://10.0.0.2:6379"})
	require.ErrorContains(t, err, "not host:port")
	_, err = clusterOptions([]string{"10.0.0.1"})
	require.ErrorContains(t, err, "not host:port")

	for shards, ok := range map[string]bool{"1": true, "2": false, "3": true, "8": true, "0": false} {
		_, err := LoadConfig(func(k string) string { return map[string]string{"SECKILL_DEV_REDIS_SHARDS": shards}[k] })
		if ok {
			require.NoError(t, err, shards)
		} else {
			require.ErrorContains(t, err, "SECKILL_DEV_REDIS_SHARDS", shards)
		}
	}
}

// TestDevKafkaConfig: dev mode's broker is the in-process one unless
// SECKILL_DEV_KAFKA=apache, which takes 1 or 3 brokers; anything else is
// refused with an error naming the variable and what to set.
func TestDevKafkaConfig(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "embedded", cfg.DevKafka)
	require.Equal(t, 1, cfg.DevKafkaBrokers)
	for _, c := range []struct {
		kind, brokers, wantErr string
	}{
		{"apache", "1", ""},
		{"apache", "3", ""},
		{"embedded", "1", ""},
		{"apache", "2", "SECKILL_DEV_KAFKA_BROKERS must be 1 or 3"},
		{"apache", "0", "SECKILL_DEV_KAFKA_BROKERS must be 1 or 3"},
		{"embedded", "3", "SECKILL_DEV_KAFKA_BROKERS=3 needs SECKILL_DEV_KAFKA=apache"},
		{"kafka", "1", "SECKILL_DEV_KAFKA must be embedded or apache"},
	} {
		env := map[string]string{"SECKILL_DEV_KAFKA": c.kind, "SECKILL_DEV_KAFKA_BROKERS": c.brokers}
		cfg, err := LoadConfig(func(k string) string { return env[k] })
		if c.wantErr == "" {
			require.NoError(t, err, "%v", env)
			require.Equal(t, c.kind, cfg.DevKafka)
		} else {
			require.ErrorContains(t, err, c.wantErr, "%v", env)
		}
	}
}

// TestWorkerBatchConfig: the workers' batch size and linger default to 100
// and 50ms, take any value in their bounds, and refuse the rest with an
// error that names the variable and says what to set.
func TestWorkerBatchConfig(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, 100, cfg.WorkerBatch)
	require.Equal(t, 50*time.Millisecond, cfg.WorkerLinger)

	for _, c := range []struct {
		name, value string
		batch       int
		linger      time.Duration
		bad         string // part of the error; "" when the value is good
	}{
		{name: "SECKILL_WORKER_BATCH", value: "1", batch: 1, linger: 50 * time.Millisecond},
		{name: "SECKILL_WORKER_BATCH", value: " 250 ", batch: 250, linger: 50 * time.Millisecond},
		{name: "SECKILL_WORKER_BATCH", value: "1000", batch: 1000, linger: 50 * time.Millisecond},
		{name: "SECKILL_WORKER_LINGER", value: "1ms", batch: 100, linger: time.Millisecond},
		{name: "SECKILL_WORKER_LINGER", value: "250us", batch: 100, linger: 250 * time.Microsecond},
		{name: "SECKILL_WORKER_LINGER", value: "5s", batch: 100, linger: 5 * time.Second},
		{name: "SECKILL_WORKER_BATCH", value: "0", bad: "between 1 and 1000"},
		{name: "SECKILL_WORKER_BATCH", value: "-5", bad: "between 1 and 1000"},
		{name: "SECKILL_WORKER_BATCH", value: "1001", bad: "between 1 and 1000"},
		{name: "SECKILL_WORKER_BATCH", value: "lots", bad: "not a whole number"},
		{name: "SECKILL_WORKER_LINGER", value: "0s", bad: "above 0 and at most 5s"},
		{name: "SECKILL_WORKER_LINGER", value: "-10ms", bad: "above 0 and at most 5s"},
		{name: "SECKILL_WORKER_LINGER", value: "6s", bad: "above 0 and at most 5s"},
		{name: "SECKILL_WORKER_LINGER", value: "50", bad: "not a duration"},
	} {
		cfg, err := LoadConfig(func(k string) string { return map[string]string{c.name: c.value}[k] })
		if c.bad == "" {
			require.NoError(t, err, "%s=%q", c.name, c.value)
			require.Equal(t, c.batch, cfg.WorkerBatch, "%s=%q", c.name, c.value)
			require.Equal(t, c.linger, cfg.WorkerLinger, "%s=%q", c.name, c.value)
			continue
		}
		require.ErrorContains(t, err, c.name, "%s=%q: the error names the variable", c.name, c.value)
		require.ErrorContains(t, err, c.bad, "%s=%q: the error says what is wrong", c.name, c.value)
		if strings.Contains(c.bad, "between") || strings.Contains(c.bad, "above") {
			require.ErrorContains(t, err, "set it to", "%s=%q: the error says what to set", c.name, c.value)
		}
	}
}

// TestConnectionCapsConfig: the per-address caps and the socket settings
// default to the README's values and refuse what cannot work with an error
// that names the variable.
func TestConnectionCapsConfig(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, 256, cfg.ConnsPerAddr)
	require.Equal(t, 32, cfg.WSPerAddr)
	require.Equal(t, 25, cfg.WSSignedInPercent)
	require.Equal(t, 10*time.Minute, cfg.WSAnonMaxAge)
	for _, c := range []struct {
		env map[string]string
		bad string // part of the error; "" when good
	}{
		{env: map[string]string{"SECKILL_CONNS_PER_ADDR": "64", "SECKILL_WS_PER_ADDR": "64"}},
		{env: map[string]string{"SECKILL_WS_SIGNED_IN_PERCENT": "0", "SECKILL_WS_ANON_MAX_AGE": "10s"}},
		{env: map[string]string{"SECKILL_CONNS_PER_ADDR": "0"}, bad: "SECKILL_CONNS_PER_ADDR"},
		{env: map[string]string{"SECKILL_WS_PER_ADDR": "-1"}, bad: "SECKILL_WS_PER_ADDR"},
		{env: map[string]string{"SECKILL_CONNS_PER_ADDR": "16"}, bad: "may not exceed SECKILL_CONNS_PER_ADDR (16)"},
		{env: map[string]string{"SECKILL_WS_SIGNED_IN_PERCENT": "91"}, bad: "between 0 and 90"},
		{env: map[string]string{"SECKILL_WS_ANON_MAX_AGE": "5s"}, bad: "at least 10s"},
	} {
		_, err := LoadConfig(func(k string) string { return c.env[k] })
		if c.bad == "" {
			require.NoError(t, err, "%v", c.env)
		} else {
			require.ErrorContains(t, err, c.bad, "%v", c.env)
		}
	}
}

// TestDescriptorReserve: the reserve covers every Redis pool and both
// PostgreSQL pools.
func TestDescriptorReserve(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, uint64(redisPoolSize+16+8+fdOtherReserve), cfg.descriptorReserve())
	cfg.RedisCluster = []string{"10.0.0.1:6379"}
	require.Equal(t, uint64(3*redisPoolSize+16+8+fdOtherReserve), cfg.descriptorReserve(), "a cluster has three masters at least")
}

// TestTracingConfig: tracing is off by default, takes the standard
// OTEL_EXPORTER_OTLP_ENDPOINT when SECKILL_OTLP_ENDPOINT is unset, and
// refuses a ratio outside 0..1 and an unknown dev tracer.
func TestTracingConfig(t *testing.T) {
	cfg, err := LoadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Empty(t, cfg.OTLPEndpoint, "off by default")
	require.Equal(t, 0.01, cfg.TraceSampleRatio)
	require.Equal(t, 500*time.Millisecond, cfg.TraceSlow)
	for _, c := range []struct {
		env      map[string]string
		endpoint string
		wantErr  string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318", "SECKILL_OTLP_ENDPOINT": "collector:4318"}, "collector:4318", ""},
		{map[string]string{"SECKILL_TRACE_SAMPLE_RATIO": "1.5"}, "", "SECKILL_TRACE_SAMPLE_RATIO must be between 0 and 1"},
		{map[string]string{"SECKILL_TRACE_SAMPLE_RATIO": "half"}, "", "not a number"},
		{map[string]string{"SECKILL_TRACE_SLOW": "-1s"}, "", "SECKILL_TRACE_SLOW must not be negative"},
		{map[string]string{"SECKILL_DEV_TRACING": "zipkin"}, "", "SECKILL_DEV_TRACING must be empty or jaeger"},
	} {
		cfg, err := LoadConfig(func(k string) string { return c.env[k] })
		if c.wantErr != "" {
			require.ErrorContains(t, err, c.wantErr, "%v", c.env)
			continue
		}
		require.NoError(t, err, "%v", c.env)
		require.Equal(t, c.endpoint, cfg.OTLPEndpoint)
	}
}

// SECKILL_REDIS_WAIT_REPLICAS unset waits where replicas are (auto); an
// explicit count wins, 0 included; anything else is refused by name.
func TestWaitReplicasConfig(t *testing.T) {
	for v, want := range map[string]int{"": redisstock.WaitReplicasAuto, "auto": redisstock.WaitReplicasAuto, "0": 0, "2": 2} {
		cfg, err := LoadConfig(func(k string) string {
			if k == "SECKILL_REDIS_WAIT_REPLICAS" {
				return v
			}
			return ""
		})
		require.NoError(t, err, v)
		require.Equal(t, want, cfg.WaitReplicas(), v)
	}
	for _, v := range []string{"-1", "one", "Auto "} {
		_, err := LoadConfig(func(k string) string {
			if k == "SECKILL_REDIS_WAIT_REPLICAS" {
				return v
			}
			return ""
		})
		require.ErrorContains(t, err, "SECKILL_REDIS_WAIT_REPLICAS", v)
	}
}
