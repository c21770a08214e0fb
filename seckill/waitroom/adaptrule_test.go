package waitroom_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// healthy is a fleet well within every limit: buys fast, nothing failing,
// breakers closed, the workers keeping up.
var healthy = waitroom.Health{BuyP99: 10 * time.Millisecond, Buys: 500, Breaker: 0, Lag: 3, LagBefore: 5}

var bounds = seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 20, MaxPerSecond: 1000}

// One judgement from a settled state (last change and trouble long ago):
// what each signal alone does to the rate.
func TestRuleJudgesEachSignal(t *testing.T) {
	rule := waitroom.DefaultRule
	t0 := time.UnixMilli(1_800_000_000_000)
	settled := waitroom.RateState{Rate: 500, Base: 500, Changed: t0.Add(-time.Minute), Trouble: t0.Add(-time.Minute)}
	with := func(f func(*waitroom.Health)) waitroom.Health {
		h := healthy
		f(&h)
		return h
	}
	for _, c := range []struct {
		name   string
		health waitroom.Health
		want   int64
	}{
		{"healthy: 10% faster", healthy, 550},
		{"p99 above the target: 30% slower", with(func(h *waitroom.Health) { h.BuyP99 = 80 * time.Millisecond }), 350},
		{"p99 in the dead band (80-100% of the target): holds", with(func(h *waitroom.Health) { h.BuyP99 = 45 * time.Millisecond }), 500},
		{"p99 at the band's lower edge: grows", with(func(h *waitroom.Health) { h.BuyP99 = 40 * time.Millisecond }), 550},
		{"no buys measured: grows", with(func(h *waitroom.Health) { h.BuyP99, h.Buys = 0, 0 }), 550},
		{"breaker open: slower", with(func(h *waitroom.Health) { h.Breaker = 2 }), 350},
		{"breaker half-open: holds", with(func(h *waitroom.Health) { h.Breaker = 1 }), 500},
		{"2% of buys failing: slower", with(func(h *waitroom.Health) { h.Failed = 10 }), 350},
		{"one failure in 500: holds", with(func(h *waitroom.Health) { h.Failed = 1 }), 500},
		{"orders failing with no buys: slower", with(func(h *waitroom.Health) { h.Buys, h.Failed = 0, 3 }), 350},
		{"lag above the limit and growing: slower", with(func(h *waitroom.Health) { h.Lag, h.LagBefore = 2000, 1500 }), 350},
		{"lag above the limit, not moving (stalled): slower", with(func(h *waitroom.Health) { h.Lag, h.LagBefore = 2000, 2000 }), 350},
		{"lag above the limit but falling: holds", with(func(h *waitroom.Health) { h.Lag, h.LagBefore = 2000, 2500 }), 500},
		{"lag between half the limit and the limit: holds", with(func(h *waitroom.Health) { h.Lag, h.LagBefore = 700, 600 }), 500},
		{"lag unknown: holds, never grows blind", with(func(h *waitroom.Health) { h.Lag, h.LagBefore = -1, -1 }), 500},
		{"nothing known: holds", waitroom.UnknownHealth, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rule.Next(settled, c.health, bounds, 500, t0)
			require.Equal(t, c.want, got.Rate)
		})
	}
}

// The rate starts at admit_per_second (within the bounds), and starts
// again from a new one the operator sets; it never leaves the bounds.
func TestRuleStartsAndStaysInBounds(t *testing.T) {
	rule := waitroom.DefaultRule
	t0 := time.UnixMilli(1_800_000_000_000)
	st := rule.Next(waitroom.RateState{}, healthy, bounds, 300, t0)
	require.Equal(t, waitroom.RateState{Rate: 300, Base: 300, Changed: t0}, st)

	st = rule.Next(waitroom.RateState{Rate: 120, Base: 300, Changed: t0}, healthy, bounds, 700, t0.Add(time.Second))
	require.EqualValues(t, 700, st.Rate, "a new admit_per_second restarts the rate")
	require.EqualValues(t, 700, st.Base)

	low := waitroom.RateState{Rate: 21, Base: 300, Changed: t0.Add(-time.Minute)}
	require.EqualValues(t, 20, rule.Next(low, waitroom.Health{Breaker: 2}, bounds, 300, t0).Rate, "never below min_per_second")
	high := waitroom.RateState{Rate: 990, Base: 300, Changed: t0.Add(-time.Minute), Trouble: t0.Add(-time.Minute)}
	require.EqualValues(t, 1000, rule.Next(high, healthy, bounds, 300, t0).Rate, "never above max_per_second")
}

// simulate judges every 500 ms for d, the health at each judgement given by
// plant from the rate then in force, and returns the rate after each.
func simulate(rule waitroom.Rule, st waitroom.RateState, a seckill.Adaptive, start int64, t0 time.Time, d time.Duration,
	plant func(rate int64, at time.Duration) waitroom.Health) []int64 {
	var rates []int64
	for at := time.Duration(0); at <= d; at += 500 * time.Millisecond {
		st = rule.Next(st, plant(st.Rate, at), a, start, t0.Add(at))
		rates = append(rates, st.Rate)
	}
	return rates
}

// Workers stalled: the lag grows at the rate admitted. The rate falls to
// the minimum within seconds, never rising on the way, at most one cut a
// second. When the workers recover (lag drains, then stays low) it climbs
// back to the maximum, more slowly than it fell, each step at most 10%.
func TestRuleFallsUnderStallAndRecovers(t *testing.T) {
	rule := waitroom.DefaultRule
	t0 := time.UnixMilli(1_800_000_000_000)
	a := seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 50, MaxPerSecond: 1000}
	st := rule.Next(waitroom.RateState{}, healthy, a, 1000, t0)

	lag, before := int64(0), int64(0)
	stalled := func(rate int64, _ time.Duration) waitroom.Health {
		before, lag = lag, lag+rate/2 // half a second's buys each judgement
		h := healthy
		h.Lag, h.LagBefore = lag, before
		return h
	}
	fall := simulate(rule, st, a, 1000, t0, 20*time.Second, stalled)
	require.EqualValues(t, 50, fall[len(fall)-1], "falls to the minimum: %v", fall)
	fellIn := 0
	for i := 1; i < len(fall); i++ {
		require.LessOrEqual(t, fall[i], fall[i-1], "never rises while stalled: %v", fall)
		if fall[i-1] > 50 {
			fellIn = i
		}
	}
	require.LessOrEqual(t, fellIn, 2*12, "at the minimum within 12 s: %v", fall)
	for i := 2; i < len(fall); i++ {
		require.False(t, fall[i] < fall[i-1] && fall[i-1] < fall[i-2], "at most one cut a second: %v", fall)
	}

	st = waitroom.RateState{Rate: 50, Base: 1000, Changed: t0, Trouble: t0}
	recovered := func(_ int64, at time.Duration) waitroom.Health {
		h := healthy
		h.Lag, h.LagBefore = max(0, 5000-int64(at/time.Millisecond)), 5000 // drains 1,000 a second
		return h
	}
	rise := simulate(rule, st, a, 1000, t0, 2*time.Minute, recovered)
	require.EqualValues(t, 1000, rise[len(rise)-1], "climbs back to the maximum: %v", rise)
	for i := 1; i < len(rise); i++ {
		require.GreaterOrEqual(t, rise[i], rise[i-1], "never falls while healthy: %v", rise)
		require.LessOrEqual(t, float64(rise[i]), float64(rise[i-1])*1.1+1, "each step at most 10%%: %v", rise)
	}
	require.EqualValues(t, 50, rise[2*3], "holds while the lag drains above half the limit: %v", rise)
	climbedIn := 0
	for i, r := range rise {
		if r < 1000 {
			climbedIn = i
		}
	}
	require.Greater(t, climbedIn, fellIn, "recovers more slowly than it falls")
}

// A back end whose p99 grows with the rate (p99 = rate × ms): from any
// start the rate settles inside the dead band and then never moves; it
// changes direction at most once on the way (a fall, then a climb), so it
// does not oscillate around the target.
func TestRuleSettlesWithoutOscillating(t *testing.T) {
	rule := waitroom.DefaultRule
	t0 := time.UnixMilli(1_800_000_000_000)
	a := seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 10, MaxPerSecond: 5000}
	for _, c := range []struct {
		name      string
		perShop   time.Duration // p99 added by each shopper a second
		start     int64
		bandLow   int64 // the rates whose p99 is in the dead band
		bandHigh  int64
		settledBy time.Duration
	}{
		{"capacity 500/s, start at 5000", 100 * time.Microsecond, 5000, 400, 500, time.Minute},
		{"capacity 500/s, start at 10", 100 * time.Microsecond, 10, 400, 500, 2 * time.Minute},
		{"capacity 2000/s, start at 100", 25 * time.Microsecond, 100, 1600, 2000, 2 * time.Minute},
		{"capacity 40/s, start at 3000", 1250 * time.Microsecond, 3000, 32, 40, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := rule.Next(waitroom.RateState{}, healthy, a, c.start, t0)
			plant := func(rate int64, _ time.Duration) waitroom.Health {
				h := healthy
				h.BuyP99 = time.Duration(rate) * c.perShop
				return h
			}
			rates := simulate(rule, st, a, c.start, t0, 5*time.Minute, plant)
			settled := int(c.settledBy / (500 * time.Millisecond))
			final := rates[len(rates)-1]
			require.GreaterOrEqual(t, final, c.bandLow, "%v", rates)
			require.LessOrEqual(t, final, c.bandHigh, "%v", rates)
			for _, r := range rates[settled:] {
				require.Equal(t, final, r, "no change once settled: %v", rates)
			}
			turns, dir := 0, 0
			for i := 1; i < len(rates); i++ {
				d := 0
				switch {
				case rates[i] > rates[i-1]:
					d = 1
				case rates[i] < rates[i-1]:
					d = -1
				}
				if d != 0 && dir != 0 && d != dir {
					turns++
				}
				if d != 0 {
					dir = d
				}
			}
			require.LessOrEqual(t, turns, 1, "at most one turn: %v", rates)
		})
	}
}
