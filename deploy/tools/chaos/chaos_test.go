package chaos_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/chaos"
	"github.com/flashsale/seckill/deploy/tools/fleet"
)

// Sizes of the two forms. The short one (make test) proves every fault on
// every CI run with a small crowd; the full one (make chaos, SECKILL_CHAOS=full)
// is a crowd of thousands with the faults at their full length.
var (
	short = chaos.Options{
		Shoppers: 160, Arrive: 5 * time.Second, FaultAt: 1500 * time.Millisecond,
		Freeze: 5 * time.Second, Down: 2 * time.Second, Patience: 30 * time.Second,
		SettleWithin: 2 * time.Minute,
	}
	full = chaos.Options{
		Shoppers: 4000, Arrive: 40 * time.Second, FaultAt: 10 * time.Second,
		Freeze: 10 * time.Second, Down: 2 * time.Second, Patience: time.Minute,
		SettleWithin: 3 * time.Minute,
	}
)

// TestFaults injects every fault into its own crowd and checks each one's
// invariants. SECKILL_CHAOS=full runs the full form; SECKILL_CHAOS_FAULTS (a
// comma-separated list of fault names) runs only those; SECKILL_CHAOS_BIN
// uses a built binary instead of building one; SECKILL_CHAOS_TABLE writes the
// table there too.
func TestFaults(t *testing.T) {
	opts := short
	if os.Getenv("SECKILL_CHAOS") == "full" {
		opts = full
	}
	var picked bool
	if opts.Faults, picked = pickFaults(t, chaos.Faults()); picked && len(opts.Faults) == 0 {
		t.Log("SECKILL_CHAOS_FAULTS names none of the in-process broker's faults")
		return
	}
	results := run(t, opts, os.Getenv("SECKILL_CHAOS_TABLE"))
	require.Len(t, results, max(len(opts.Faults), len(chaos.Faults())*boolInt(len(opts.Faults) == 0)))
}

// Sizes of the Apache Kafka run's two forms. The short one (make test) is
// two faults with a small crowd, on one start of the three nodes; the full
// one (make chaos) is every fault of chaos.ApacheFaults with the crowd of
// the full form.
var (
	apacheShort = chaos.Options{
		Shoppers: 200, Arrive: 15 * time.Second, FaultAt: 1500 * time.Millisecond,
		Freeze: 5 * time.Second, Down: 2 * time.Second, KafkaDown: 4 * time.Second,
		Patience: 30 * time.Second, SettleWithin: 2 * time.Minute,
		Faults: []string{chaos.FaultLeaderKilled, chaos.FaultTwoBrokersDown},
	}
	apacheFull = chaos.Options{
		Shoppers: 4000, Arrive: 40 * time.Second, FaultAt: 10 * time.Second,
		Freeze: 10 * time.Second, Down: 2 * time.Second, KafkaDown: 10 * time.Second,
		Patience: time.Minute, SettleWithin: 3 * time.Minute,
	}
)

// TestFaultsApacheKafka runs the served system on a three-node Apache Kafka
// cluster and injects the cluster's faults (a leader killed, a broker
// frozen, two of three down, the controller killed, the whole cluster
// restarted) and the other faults' Apache forms, each into its own crowd,
// with the same checks as TestFaults. SECKILL_CHAOS=full runs every fault
// with the full crowd; SECKILL_CHAOS_FAULTS and SECKILL_CHAOS_TABLE as
// TestFaults (the table is written beside it, with .apache before .md).
func TestFaultsApacheKafka(t *testing.T) {
	opts := apacheShort
	if os.Getenv("SECKILL_CHAOS") == "full" {
		opts = apacheFull
	}
	opts.ApacheKafka = true
	if names, picked := pickFaults(t, chaos.ApacheFaults()); picked {
		if len(names) == 0 {
			t.Log("SECKILL_CHAOS_FAULTS names none of the Apache Kafka run's faults")
			return
		}
		opts.Faults = names
	}
	table := os.Getenv("SECKILL_CHAOS_TABLE")
	if table != "" {
		table = strings.TrimSuffix(table, ".md") + ".apache.md"
	}
	results := run(t, opts, table)
	want := len(opts.Faults)
	if want == 0 {
		want = len(chaos.ApacheFaults())
	}
	require.Len(t, results, want)
	for _, res := range results {
		if strings.HasPrefix(res.Fault, "kafka:") {
			require.NotEmpty(t, res.Notes, "%s says what it struck", res.Fault)
		}
	}
}

// pickFaults returns the faults of SECKILL_CHAOS_FAULTS (comma separated)
// that are among of, and whether the variable names any. A name no run
// knows fails the test.
func pickFaults(t *testing.T, of []string) ([]string, bool) {
	t.Helper()
	list := os.Getenv("SECKILL_CHAOS_FAULTS")
	if strings.TrimSpace(list) == "" {
		return nil, false
	}
	var names []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		require.True(t, slices.Contains(chaos.Faults(), f) || slices.Contains(chaos.ApacheFaults(), f) || f == chaos.FaultFleet,
			"SECKILL_CHAOS_FAULTS: unknown fault %q", f)
		if slices.Contains(of, f) {
			names = append(names, f)
		}
	}
	return names, true
}

// Sizes of the fleet test's two forms: make test (a small crowd) and make
// fleet (SECKILL_FLEET=full).
var (
	fleetShort = chaos.Options{
		Shoppers: 240, Arrive: 5 * time.Second, FaultAt: 2 * time.Second,
		Patience: 30 * time.Second, SettleWithin: 2 * time.Minute,
	}
	fleetFull = chaos.Options{
		Shoppers: 6000, Arrive: 30 * time.Second, FaultAt: 10 * time.Second,
		Patience: time.Minute, SettleWithin: 3 * time.Minute,
	}
)

// TestFleet runs the system as a fleet of separate processes (3 gateways,
// 2 workers, 2 sweepers, Apache Kafka as 3 nodes, PostgreSQL, a Redis
// Cluster of 3 masters: docker-compose.yml's topology), spreads a crowd
// over the gateways, kills one gateway and one worker with SIGKILL mid-crowd
// and checks every invariant of the sale. SECKILL_FLEET=full runs the bigger
// crowd of make fleet; SECKILL_FLEET_TABLE writes its table there too.
func TestFleet(t *testing.T) {
	opts := fleetShort
	if os.Getenv("SECKILL_FLEET") == "full" {
		opts = fleetFull
	}
	opts.Faults = []string{chaos.FaultFleet}
	opts.Fleet = fleet.Fleet3x2x2
	results := run(t, opts, os.Getenv("SECKILL_FLEET_TABLE"))
	require.Len(t, results, 1)
	require.NotEmpty(t, results[0].Notes, "the kill says what it killed")
	require.Contains(t, results[0].Notes, "on Apache Kafka, 3 nodes", "the fleet runs on docker-compose.yml's brokers")
}

// run runs opts' faults on a scratch folder with the binary of
// SECKILL_CHAOS_BIN (or one it builds), prints the table (also to tablePath
// when set) and checks every result.
func run(t *testing.T, opts chaos.Options, tablePath string) []chaos.Result {
	t.Helper()
	dir, err := chaos.ScratchDir()
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the services' data and the processes' logs are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	opts.Dir = dir
	opts.Bin = os.Getenv("SECKILL_CHAOS_BIN")
	if opts.Bin == "" {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		opts.Bin, err = fleet.Build(ctx, dir)
		cancel()
		require.NoError(t, err)
	}
	opts.Logf = t.Logf

	results, err := chaos.Run(t.Context(), opts)
	require.NoError(t, err)

	var table strings.Builder
	require.NoError(t, chaos.WriteTable(&table, results))
	t.Logf("\n%s", table.String())
	if tablePath != "" {
		require.NoError(t, os.WriteFile(tablePath, []byte(table.String()), 0o644))
	}

	for _, res := range results {
		t.Run(res.Fault, func(t *testing.T) {
			require.Empty(t, res.Broken(), "%s: the sale did not come through whole", res.Fault)
		})
	}
	return results
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
