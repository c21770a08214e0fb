package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCountOutcomes reads the buy outcomes of a /metrics text the way the
// crowds' profiles count them: one outcome, or all of them.
func TestCountOutcomes(t *testing.T) {
	const text = `# HELP seckill_buy_outcomes_total Buy attempts.
# TYPE seckill_buy_outcomes_total counter
seckill_buy_outcomes_total{outcome="accepted"} 100
seckill_buy_outcomes_total{outcome="sold_out"} 19850
seckill_buy_outcomes_total{outcome="limit_exceeded"} 50
# HELP other_total Something else.
# TYPE other_total counter
other_total{outcome="accepted"} 7
`
	for outcome, want := range map[string]float64{"accepted": 100, "sold_out": 19850, "": 20000, "rate_limited": 0} {
		n, err := countOutcomes(strings.NewReader(text), outcome)
		require.NoError(t, err)
		require.Equal(t, want, n, "outcome %q", outcome)
	}
	n, err := countOutcomes(strings.NewReader("# nothing bought yet\n"), "")
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestCountRoute reads the requests of one route of a /metrics text, the
// way the trivial route's profile counts them: every method and status.
func TestCountRoute(t *testing.T) {
	const text = `# HELP seckill_http_requests_total HTTP requests answered.
# TYPE seckill_http_requests_total counter
seckill_http_requests_total{method="GET",route="/healthz",status="200"} 150000
seckill_http_requests_total{method="HEAD",route="/healthz",status="200"} 3
seckill_http_requests_total{method="POST",route="/api/v1/vouchers/:id/orders",status="202"} 10000
`
	for route, want := range map[string]float64{"/healthz": 150003, "/api/v1/vouchers/:id/orders": 10000, "/readyz": 0} {
		n, err := countRoute(strings.NewReader(text), route)
		require.NoError(t, err)
		require.Equal(t, want, n, "route %q", route)
	}
	require.Equal(t, 2, healthzProfileSeconds(5*time.Second))
	require.Equal(t, 1, healthzProfileSeconds(2*time.Second), "at least a second")
}

// TestAwaitRiseAnchorsOnTheFirstNewAnswer: the window opens at the first
// count above the one read before the crowd, whatever came before it.
func TestAwaitRiseAnchorsOnTheFirstNewAnswer(t *testing.T) {
	counts := []float64{20000, 20000, 20000, 20003, 20500}
	calls := 0
	count := func(context.Context) (float64, error) {
		n := counts[min(calls, len(counts)-1)]
		calls++
		return n, nil
	}
	got, err := awaitRise(context.Background(), count, 20000, time.Minute, time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 20003.0, got)
	require.Equal(t, 4, calls)

	never := func(context.Context) (float64, error) { return 5, nil }
	_, err = awaitRise(context.Background(), never, 5, 0, time.Millisecond)
	require.ErrorContains(t, err, "first answer did not come")
}

// TestSplitProfileByRole sums a CPU profile's samples by the role label,
// the unlabelled ones being the gateway's.
func TestSplitProfileByRole(t *testing.T) {
	fn := &profile.Function{ID: 1, Name: "f"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	sample := func(ns int64, role string) *profile.Sample {
		s := &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{1, ns}}
		if role != "" {
			s.Label = map[string][]string{profileRole: {role}}
		}
		return s
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample:     []*profile.Sample{sample(10, ""), sample(20, "worker"), sample(5, ""), sample(7, "broker")},
		Location:   []*profile.Location{loc},
		Function:   []*profile.Function{fn},
	}
	var buf bytes.Buffer
	require.NoError(t, p.Write(&buf))
	by, err := splitProfile(&buf)
	require.NoError(t, err)
	require.Equal(t, map[string]time.Duration{"": 15, "worker": 20, "broker": 7}, by)
	share := cpuShare{byRole: by, answers: 3}
	per, ok := share.perBuy()
	require.True(t, ok)
	require.Equal(t, time.Duration(5), per)
	_, ok = cpuShare{byRole: by}.perBuy()
	require.False(t, ok)
}

// The bench runs from the tools' module (go -C deploy/tools run), which has
// a go.mod of its own; the allocations' benchmark must still find the
// product's folder, the one with the gateway.
func TestModuleRootIsTheProducts(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(root, "gateway", "bench_test.go"))
	assert.NoFileExists(t, filepath.Join(root, "cmd", "bench", "main.go"), "not the tools' module")
}
