package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
)

func TestProcessCountersFrom(t *testing.T) {
	msgs, bytes, txs, reserves, err := processCountersFrom(strings.NewReader(`# TYPE seckill_redis_script_duration_seconds histogram
seckill_redis_script_duration_seconds_bucket{script="release",le="+Inf"} 3
seckill_redis_script_duration_seconds_sum{script="release"} 0.1
seckill_redis_script_duration_seconds_count{script="release"} 3
seckill_redis_script_duration_seconds_bucket{script="reserve",le="+Inf"} 7
seckill_redis_script_duration_seconds_sum{script="reserve"} 0.1
seckill_redis_script_duration_seconds_count{script="reserve"} 7
# TYPE seckill_persist_duration_seconds histogram
seckill_persist_duration_seconds_bucket{le="+Inf"} 4
seckill_persist_duration_seconds_sum 0.1
seckill_persist_duration_seconds_count 4
# TYPE seckill_kafka_produce_duration_seconds histogram
seckill_kafka_produce_duration_seconds_bucket{le="+Inf"} 12
seckill_kafka_produce_duration_seconds_sum 0.5
seckill_kafka_produce_duration_seconds_count 12
# TYPE seckill_kafka_produce_errors_total counter
seckill_kafka_produce_errors_total 2
# TYPE seckill_kafka_produced_bytes_total counter
seckill_kafka_produced_bytes_total 1500
`))
	require.NoError(t, err)
	assert.Equal(t, 10.0, msgs, "the failed ones were not produced")
	assert.Equal(t, 1500.0, bytes)
	assert.Equal(t, 4.0, txs)
	assert.Equal(t, 7.0, reserves, "the reserve script's series only")
}

// costOf divides the counters' change by the answers; the sold-out run's
// net figure sets its buys aside at the accepted run's cost.
func TestCostOf(t *testing.T) {
	before := counters{
		redis: cost.Redis{Commands: map[string]cost.Command{"evalsha": {Calls: 10}, "info": {Calls: 3}}, CPU: time.Second},
		pg:    cost.Postgres{Xacts: 5, RowsWritten: 100, WALBytes: 1000},
	}
	after := counters{
		redis: cost.Redis{Commands: map[string]cost.Command{"evalsha": {Calls: 210, Usec: 2000}, "hget": {Calls: 400}, "info": {Calls: 4}},
			CPU: time.Second + 5*time.Millisecond},
		pg:        cost.Postgres{Xacts: 7, RowsWritten: 300, WALBytes: 41000},
		kafkaMsgs: 100, kafkaBytes: 15000, workerTxs: 2, reserveCalls: 100,
	}
	share := cpuShare{window: time.Second, answers: 50,
		byRole: map[string]time.Duration{"": 5 * time.Millisecond, "worker": time.Millisecond}}
	acc := costOf(before, after, 100, 100, share)
	assert.Equal(t, 6.0, acc.RedisCommands, "the INFO reads are not the buys'")
	assert.Equal(t, 2.0, acc.RedisScripts)
	assert.Equal(t, map[string]float64{"evalsha": 2, "hget": 4}, acc.RedisByCommand)
	assert.InDelta(t, 50.0, acc.RedisCPUMicros, 1e-9)
	assert.InDelta(t, 20.0, acc.RedisScriptMicros, 1e-9, "the scripts' own time")
	assert.Equal(t, 0.02, acc.PGXacts)
	assert.Equal(t, 0.02, acc.WorkerTxs)
	assert.Equal(t, 1.0, acc.ReserveCalls)
	assert.Equal(t, 0.0, *fromMemory(acc), "every buy called the script")
	assert.Equal(t, 2.0, acc.PGRowsWritten)
	assert.Equal(t, 400.0, acc.PGWALBytes)
	assert.Equal(t, 1.0, acc.KafkaMessages)
	assert.Equal(t, 150.0, acc.KafkaBytes)
	require.NotNil(t, acc.GatewayCPUMicros)
	assert.Equal(t, 100.0, *acc.GatewayCPUMicros, "per answer counted during the profile")
	assert.Equal(t, 20.0, *acc.WorkerCPUMicros)
	assert.Equal(t, 0.0, *acc.BrokerCPUMicros)

	// 1000 answers, 100 of them buys at 6 commands: 600 commands are the
	// buys', the other 900 answers took 60.
	so := costOf(before, counters{redis: cost.Redis{Commands: map[string]cost.Command{"evalsha": {Calls: 10 + 660}}}}, 1000, 100, cpuShare{})
	so.setSoldOutNet(acc)
	require.NotNil(t, so.RedisPerSoldOut)
	assert.InDelta(t, 60.0/900, *so.RedisPerSoldOut, 1e-9)
	assert.Nil(t, so.GatewayCPUMicros, "no profile, no figure")
}

// A saved run reads back, and the table compares with it.
func TestCostTableComparesWithSaved(t *testing.T) {
	gw := 150.0
	allocs := 12
	was := benchRecord{At: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), AllocsPerBuy: &allocs,
		Accepted: runCost{Answers: 100, Accepted: 100, RedisCommands: 24, RedisByCommand: map[string]float64{"pexpireat": 5}, RedisCPUMicros: 74, GatewayCPUMicros: &gw}}
	path := filepath.Join(t.TempDir(), "bench.json")
	require.NoError(t, writeRecord(path, was))
	saved, err := readRecord(path)
	require.NoError(t, err)
	assert.Equal(t, was, *saved)

	now := benchRecord{AllocsPerBuy: &allocs,
		Accepted: runCost{Answers: 100, Accepted: 100, RedisCommands: 8, RedisByCommand: map[string]float64{}, RedisCPUMicros: 20}}
	var out bytes.Buffer
	printCost(&out, now, saved)
	s := out.String()
	assert.Regexp(t, `Redis commands \(a script's own included\)\s+24\.0 → 8\.0 \(-67%\).*MET`, s)
	assert.Regexp(t, `PEXPIREAT\s+5\.000 → 0\.000 \(-100%\)`, s, "a command gone is still shown")
	assert.Regexp(t, `Redis CPU.*74\.0 µs → 20\.0 µs.*≤ 25 µs\s+MET`, s)
	assert.Regexp(t, `gateway CPU.*150\.0 µs → –.*MISSED`, s, "not measured is not met")
	assert.Regexp(t, `allocations \(BenchmarkHandlerBuy\)\s+12 → 12\s+≤ 15\s+MET`, s)
	assert.NotContains(t, s, "the floor", "no /healthz profile in either run")

	floor, was2 := 12.5, 15.0
	now.HealthzCPUMicros, saved.HealthzCPUMicros = &floor, &was2
	out.Reset()
	printCost(&out, now, saved)
	assert.Contains(t, out.String(), "the floor: gateway CPU per GET /healthz request during its ceiling, 15.0 µs → 12.5 µs (-17%)")
}
