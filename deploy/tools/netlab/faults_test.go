package netlab_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/chaos"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/deploy/tools/netlab"
)

// The two forms of TestNetFaults: make test runs one fault with a small
// crowd on a small fleet; make netlab (SECKILL_NETLAB=full) every fault
// with a crowd of thousands on docker-compose.yml's fleet.
var (
	netShort = struct {
		chaos chaos.Options
		fleet netlab.FleetOptions
	}{
		chaos: chaos.Options{Shoppers: 200, Arrive: 6 * time.Second, FaultAt: 1500 * time.Millisecond,
			Patience: 30 * time.Second, SettleWithin: 2 * time.Minute, Faults: []string{netlab.FaultGatewayRedis}},
		fleet: netlab.FleetOptions{Shape: fleet.Shape{Gateways: 2, Workers: 1, Sweepers: 1, RedisMasters: 1}, Down: 3 * time.Second, Shoppers: 2},
	}
	netFull = struct {
		chaos chaos.Options
		fleet netlab.FleetOptions
	}{
		chaos: chaos.Options{Shoppers: 3000, Arrive: 30 * time.Second, FaultAt: 8 * time.Second,
			Patience: time.Minute, SettleWithin: 3 * time.Minute, Faults: netlab.Faults()},
		fleet: netlab.FleetOptions{Shape: fleet.Shape{Gateways: 3, Workers: 2, Sweepers: 1, RedisMasters: 3}, Down: 10 * time.Second, Shoppers: 4},
	}
)

// tightRedis are Redis client settings near the lab's round trip, for the
// second pass of the full form.
const tightRedis = "read_timeout=250ms&write_timeout=250ms"

// waitReplicas is the setting that makes a buy wait for replicas of its
// hold before its 202.
const waitReplicas = "SECKILL_REDIS_WAIT_REPLICAS"

// runFaults starts a fleet of shape (its Redis clients' URL parameters,
// replicas and replica lag among it) on new hosts of lab and runs opts'
// faults on it; the rows' names say the settings that are not the
// defaults.
func runFaults(t *testing.T, lab *netlab.Lab, shape netlab.FleetOptions, opts chaos.Options) []chaos.Result {
	t.Helper()
	shape.Bin, shape.Logf = opts.Bin, t.Logf
	if slices.Contains(opts.Faults, netlab.FaultSweeperRedis) {
		// Orders that expire during the crowd, for the sweeper to cancel;
		// their shoppers buy again in later faults, so their expired holds
		// must not refuse them (unpaid_limit is not this lab's subject).
		shape.Env = map[string]string{"SECKILL_PAY_TIMEOUT": "8s", "SECKILL_HOARD_LIMIT": "0"}
	}
	if slices.Contains(opts.Faults, netlab.FaultRedisFailover) {
		// A cluster with a replica per master at least, to be promoted.
		shape.Shape.RedisMasters, shape.Shape.RedisReplicas = max(shape.Shape.RedisMasters, 3), max(shape.Shape.RedisReplicas, 1)
	}
	if slices.Contains(opts.Faults, netlab.FaultKafkaLeader) {
		// Brokers with leaders and followers, each on a host of its own.
		shape.Broker = fleet.BrokerApache3
	}
	var settings []string
	if shape.SlowLink != (netlab.Link{}) && slices.Contains(opts.Faults, netlab.FaultSlowRedis) {
		settings = append(settings, fmt.Sprintf("the slow link %v each way, %.1f %% loss", shape.SlowLink.Delay, shape.SlowLink.Loss*100))
	}
	if shape.RedisParams != "" {
		settings = append(settings, "Redis "+strings.ReplaceAll(shape.RedisParams, "&", ", "))
	}
	if shape.RedisReplicaLag > 0 {
		settings = append(settings, fmt.Sprintf("%d replicas, min-replicas-max-lag %v", shape.Shape.RedisReplicas, shape.RedisReplicaLag))
	}
	if n := shape.Env[waitReplicas]; n != "" {
		settings = append(settings, fmt.Sprintf("%s=%s", waitReplicas, n))
	}
	shape.Dir = filepath.Join(opts.Dir, fmt.Sprintf("fleet-%d", fleetSeq.Add(1)))
	f, err := netlab.StartFleet(t.Context(), lab, shape)
	require.NoError(t, err)
	defer f.Close()
	for _, addr := range f.GatewayAddrs() {
		require.True(t, strings.HasPrefix(addr, "10.231.0."), "gateway %s is on a host of its own", addr)
	}
	opts.System = f.System()
	results, err := chaos.Run(t.Context(), opts)
	require.NoError(t, err)
	require.Len(t, results, len(opts.Faults))
	for i := range results {
		if len(settings) > 0 {
			results[i].Fault += " (" + strings.Join(settings, "; ") + ")"
		}
	}
	return results
}

// fleetSeq names each fleet's folder.
var fleetSeq atomic.Int64

// TestNetFaults runs the fleet with every process and service on a host of
// its own and makes each fault of the network (a gateway cut off from
// Redis, latency and loss between the gateways and Redis, a worker cut off
// from PostgreSQL) during a crowd, with the fault suite's checks: nothing
// oversold, the stock balanced, nobody over the limit, every 202 ended, and
// Redis and PostgreSQL agreeing again without an operator.
// SECKILL_NETLAB=full runs the full form; SECKILL_CHAOS_FAULTS picks faults
// (comma separated); SECKILL_NETLAB_TABLE writes the table there too;
// SECKILL_CHAOS_BIN uses a built binary; SECKILL_NETLAB_REDIS gives the
// Redis clients go-redis URL parameters (read_timeout=250ms);
// SECKILL_NETLAB_REDIS_REPLICAS and SECKILL_NETLAB_REDIS_REPLICA_LAG give
// the cluster's masters replicas and a replica lag (1s) past which they
// refuse writes; SECKILL_NETLAB_REDIS_WAIT (1) makes each buy wait for
// that many replicas of its hold; SECKILL_NETLAB_SLOW ("50ms,0.01") the
// slow fault's delay and loss each way.
func TestNetFaults(t *testing.T) {
	form := netShort
	if os.Getenv("SECKILL_NETLAB") == "full" {
		form = netFull
	}
	opts := form.chaos
	if list := os.Getenv("SECKILL_CHAOS_FAULTS"); strings.TrimSpace(list) != "" {
		opts.Faults = nil
		for _, f := range strings.Split(list, ",") {
			opts.Faults = append(opts.Faults, strings.TrimSpace(f))
		}
	}
	dir, err := chaos.ScratchDir()
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the services' data and the processes' logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	bin := os.Getenv("SECKILL_CHAOS_BIN")
	if bin == "" {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		bin, err = fleet.Build(ctx, dir)
		cancel()
		require.NoError(t, err)
	}

	lab, err := netlab.New(netlab.Options{Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(lab.Close)
	opts.Dir, opts.Bin, opts.Logf = dir, bin, t.Logf
	shape := form.fleet
	shape.RedisParams = os.Getenv("SECKILL_NETLAB_REDIS")
	if v := os.Getenv("SECKILL_NETLAB_REDIS_REPLICAS"); v != "" {
		shape.Shape.RedisReplicas, err = strconv.Atoi(v)
		require.NoError(t, err, "SECKILL_NETLAB_REDIS_REPLICAS")
	}
	if v := os.Getenv("SECKILL_NETLAB_REDIS_REPLICA_LAG"); v != "" {
		shape.RedisReplicaLag, err = time.ParseDuration(v)
		require.NoError(t, err, "SECKILL_NETLAB_REDIS_REPLICA_LAG")
	}
	if v := os.Getenv("SECKILL_NETLAB_REDIS_WAIT"); v != "" {
		shape.Env = map[string]string{waitReplicas: v}
	}
	if v := os.Getenv("SECKILL_NETLAB_SLOW"); v != "" {
		// "50ms,0.01": each way's delay and loss of the slow fault.
		d, l, _ := strings.Cut(v, ",")
		shape.SlowLink.Delay, err = time.ParseDuration(d)
		require.NoError(t, err, "SECKILL_NETLAB_SLOW")
		shape.SlowLink.Jitter = shape.SlowLink.Delay / 20
		if l != "" {
			shape.SlowLink.Loss, err = strconv.ParseFloat(l, 64)
			require.NoError(t, err, "SECKILL_NETLAB_SLOW")
		}
	}
	results := runFaults(t, lab, shape, opts)
	if os.Getenv("SECKILL_NETLAB") == "full" && os.Getenv("SECKILL_CHAOS_FAULTS") == "" {
		// The Redis faults again with the Redis clients' timeouts near
		// the round trip: does the cut-off gateway answer fast, and does
		// a breaker open on a slow link that works?
		tight := form.fleet
		tight.RedisParams = tightRedis
		opts.Faults = []string{netlab.FaultGatewayRedis, netlab.FaultSlowRedis}
		results = append(results, runFaults(t, lab, tight, opts)...)
		opts.Faults = []string{netlab.FaultSweeperRedis}
		results = append(results, runFaults(t, lab, form.fleet, opts)...)
		// A failover as Redis ships (a master acknowledges what its
		// replicas have not), then with masters that refuse writes no
		// replica took within a second, two replicas each so a promoted
		// replica still has one.
		opts.Faults = []string{netlab.FaultRedisFailover}
		shipped := form.fleet
		shipped.Env = map[string]string{waitReplicas: "0"} // the default waits where replicas are
		results = append(results, runFaults(t, lab, shipped, opts)...)
		safe := form.fleet
		safe.Env = shipped.Env
		safe.Shape.RedisReplicas, safe.RedisReplicaLag = 2, time.Second
		results = append(results, runFaults(t, lab, safe, opts)...)
		// And with every hold on a replica before its 202.
		acked := form.fleet
		acked.Env = map[string]string{waitReplicas: "1"}
		results = append(results, runFaults(t, lab, acked, opts)...)
		// The brokers of docker-compose.yml, each on a host of its own.
		opts.Faults = []string{netlab.FaultKafkaLeader}
		results = append(results, runFaults(t, lab, form.fleet, opts)...)
	}
	var table strings.Builder
	require.NoError(t, chaos.WriteOutcomeTable(&table, results))
	t.Logf("\n%s", table.String())
	if path := os.Getenv("SECKILL_NETLAB_TABLE"); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(table.String()), 0o644))
	}
	fwd, dropped := lab.Stats()
	t.Logf("the switch forwarded %d frames and dropped %d", fwd, dropped)

	for _, res := range results {
		t.Run(res.Fault, func(t *testing.T) {
			require.Empty(t, res.Broken(), "%s: the sale did not come through whole", res.Fault)
			require.NotEmpty(t, res.Notes, "the fault says what it did")
		})
	}
	if shape.SlowLink.Loss > 0 || !slices.Equal(opts.Faults, []string{netlab.FaultSlowRedis}) {
		require.Positive(t, dropped, "the faults dropped frames")
	}
}
