package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// waitRunOf is a measured run of accepted buys in one second, with waits
// WAITs on the master and the given CPU per process.
func waitRunOf(mode string, round, accepted int, waits int64, cpu map[string]time.Duration) waitRun {
	return waitRun{mode: mode, round: round, run: brokerRun{
		rep: loadtest.Report{ElapsedMS: 1000, Outcomes: map[loadtest.Outcome]int{loadtest.OutcomeAccepted: accepted, loadtest.OutcomeUnavailable: 2},
			Latency: map[string]loadtest.LatencyStats{"all": {P99MS: 12.5}}},
		accept: float64(accepted),
		redis:  cost.Redis{Commands: map[string]cost.Command{"wait": {Calls: waits}, "evalsha": {Calls: 2 * waits}}},
		cpu:    cpu,
	}}
}

// Each waiting run's rate is divided by the run without WAIT of its own
// round, not of another: round 2 ran on a machine twice as busy, and its
// ratio must say 0.95 all the same. The replica's CPU is its own column
// and counted in all, never in Redis's.
func TestWaitRowsRatioToTheSameRound(t *testing.T) {
	ms := time.Millisecond
	runs := []waitRun{
		waitRunOf("0", 1, 4000, 0, map[string]time.Duration{"redis-server": 80 * ms, replicaName: 40 * ms, "seckill dev": 280 * ms}),
		waitRunOf("auto", 1, 3600, 360, map[string]time.Duration{"redis-server": 108 * ms, replicaName: 72 * ms, "seckill dev": 180 * ms}),
		waitRunOf("auto", 2, 1900, 100, nil),
		waitRunOf("0", 2, 2000, 0, nil),
	}
	rows := waitRows(runs)
	require.Len(t, rows, 4)
	assert.InDelta(t, 1.0, rows[0].ratio, 1e-9)
	assert.InDelta(t, 0.90, rows[1].ratio, 1e-9)
	assert.InDelta(t, 0.95, rows[2].ratio, 1e-9, "round 2's auto over round 2's 0, not round 1's")
	assert.InDelta(t, 0.1, rows[1].waits, 1e-9, "360 WAITs for 3600 buys")
	assert.InDelta(t, 0.2, rows[1].scripts, 1e-9, "720 batches for 3600 buys")
	assert.Equal(t, 20*time.Microsecond, rows[0].redis, "80 ms over 4000 buys, the replica left out")
	assert.Equal(t, 10*time.Microsecond, rows[0].replica)
	assert.Equal(t, 100*time.Microsecond, rows[0].all, "the replica counted in all")
	assert.Equal(t, 2, rows[1].unavailable)

	// The median of 0.90 and 0.95 is 0.925: a cost of 7.5 %, under 10 %.
	median, lowest, met := waitVerdict(rows)
	assert.InDelta(t, 0.925, median, 1e-9)
	assert.InDelta(t, 0.90, lowest, 1e-9)
	assert.True(t, met)
	rows[2].ratio = 0.70 // the median of 0.90 and 0.70 is 0.80: 20 %
	_, _, met = waitVerdict(rows)
	assert.False(t, met)

	var out bytes.Buffer
	writeWaitReplica(&out, options{brokerShoppers: 10000, concurrency: 64}, runs)
	assert.Contains(t, out.String(), "| auto | 2 | 1900 | 0.95 | 12.5 ms | 2 | 0.105 | 0.053 |")
	assert.Contains(t, out.String(), "a cost of 7.5 %")
	assert.Contains(t, out.String(), ": MET")
}

// Without a run without WAIT there is nothing to compare with: no ratio,
// and no verdict of MET.
func TestWaitVerdictWithoutBaseIsMissed(t *testing.T) {
	rows := waitRows([]waitRun{waitRunOf("auto", 1, 1000, 10, nil)})
	assert.Zero(t, rows[0].ratio)
	_, _, met := waitVerdict(rows)
	assert.False(t, met)
}

// One round whose run without WAIT met a burst of other work (auto at
// 2.80 times its rate) does not hide two rounds that cost 14 and 12 %.
func TestWaitVerdictIsTheMedian(t *testing.T) {
	rows := []waitRow{{mode: "auto", ratio: 0.86}, {mode: "0", ratio: 1}, {mode: "auto", ratio: 2.80},
		{mode: "auto", ratio: 0.88}}
	median, lowest, met := waitVerdict(rows)
	assert.InDelta(t, 0.88, median, 1e-9)
	assert.InDelta(t, 0.86, lowest, 1e-9)
	assert.False(t, met, "a mean of 1.51 would have said MET")
}

// Even rounds run the modes backwards; the shared list stays as it is.
func TestInTurnReversesEvenRounds(t *testing.T) {
	assert.Equal(t, []string{"0", "auto"}, inTurn(waitModes, 1))
	assert.Equal(t, []string{"auto", "0"}, inTurn(waitModes, 2))
	assert.Equal(t, []string{"0", "auto"}, inTurn(waitModes, 3))
	assert.Equal(t, []string{"0", "auto"}, waitModes, "not reversed in place")
}
