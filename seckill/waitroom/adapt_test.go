package waitroom_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/fleethealth"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// boardHealth is the fleet's health as the board folds it (what
// cmd/seckill gives the adapter).
func boardHealth(b *fleethealth.Board) func(ctx context.Context) (waitroom.Health, error) {
	return func(ctx context.Context) (waitroom.Health, error) {
		f, err := b.Read(ctx)
		if err != nil || f.Samples == 0 {
			return waitroom.UnknownHealth, err
		}
		return waitroom.Health{BuyP99: f.BuyP99, Buys: f.Buys, Failed: f.Failed, Breaker: f.Breaker, Lag: f.Lag, LagBefore: f.LagBefore}, nil
	}
}

// The health the adapters judge: the board folds the fresh samples of the fleet into one: the worst p99
// and breaker, the sums of buys and failures, the largest lag with the
// measurement before it. A sample older than Fresh does not count; one
// older than Forget is deleted.
func TestBoardFoldsFreshSamples(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	require.NoError(t, c.Del(ctx, fleethealth.Key).Err())
	b := fleethealth.NewBoard(c)

	f, err := b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, fleethealth.Fleet{Lag: -1, LagBefore: -1}, f, "nobody reports")

	now := time.Now()
	for id, s := range map[string]fleethealth.Sample{
		"gw1":     {At: now, BuyP99: 20 * time.Millisecond, Buys: 100, Failed: 1, Breaker: 0, Lag: -1, LagBefore: -1},
		"gw2":     {At: now, BuyP99: 70 * time.Millisecond, Buys: 50, Failed: 2, Breaker: 1, Lag: -1, LagBefore: -1},
		"sweeper": {At: now, Lag: 900, LagBefore: 1200},
		"late":    {At: now.Add(-2 * fleethealth.Fresh), BuyP99: time.Second, Breaker: 2, Lag: 5000},
		"gone":    {At: now.Add(-2 * fleethealth.Forget), Breaker: 2},
	} {
		require.NoError(t, b.Publish(ctx, id, s))
	}
	f, err = b.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, fleethealth.Fleet{Samples: 3, BuyP99: 70 * time.Millisecond, Buys: 150, Failed: 3, Breaker: 1,
		Lag: 900, LagBefore: 1200}, f)
	ids, err := c.HKeys(ctx, fleethealth.Key).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"gw1", "gw2", "sweeper", "late"}, ids, "the sample older than Forget is deleted")
}

// Two gateways on one Redis adapt one room from the fleet's health on the
// board. The workers stall (the lag the sweeper publishes grows): the rate
// in force falls to the minimum, both gateways obey it, the admission
// slows to it, the metric and the estimated wait show it. The workers
// recover (the lag drains): the rate climbs back to the maximum.
func TestAdaptiveRateFollowsWorkersLag(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client(t)
	board := fleethealth.NewBoard(c)
	require.NoError(t, c.Del(ctx, fleethealth.Key).Err())
	now := redisNow(t, c)
	v := seckill.Voucher{ID: 140500, Kind: seckill.KindSeckill, BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 400,
			Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 20, MaxPerSecond: 400}}}
	line, ok := waitroom.LineOf(v)
	require.True(t, ok)
	rule := waitroom.Rule{SlowEvery: 150 * time.Millisecond, GrowEvery: 150 * time.Millisecond, Calm: 300 * time.Millisecond, MaxLag: 100}

	reg := prometheus.NewRegistry()
	var gateways []*waitroom.Adapter
	for i := range 2 {
		cfg := waitroom.AdapterConfig{Redis: client(t), Rule: rule, Every: 50 * time.Millisecond,
			Vouchers: func(context.Context) ([]seckill.Voucher, error) { return []seckill.Voucher{v}, nil },
			Health:   boardHealth(board)}
		if i == 0 {
			cfg.Registerer = reg
		}
		a, err := waitroom.NewAdapter(cfg)
		require.NoError(t, err)
		gateways = append(gateways, a)
	}
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	var wg sync.WaitGroup
	for u := range int64(3000) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := room.Join(ctx, line, 1+u)
			assert.NoError(t, err)
		}()
		if u%16 == 15 {
			wg.Wait()
		}
	}
	wg.Wait()

	// The sweeper's sample: the lag, set by the test; a gateway's: buys fast.
	var mu sync.Mutex
	lag, lagBefore := int64(0), int64(0)
	publish := func() {
		mu.Lock()
		s := fleethealth.Sample{At: time.Now(), Lag: lag, LagBefore: lagBefore}
		mu.Unlock()
		require.NoError(t, board.Publish(ctx, "sweeper", s))
		require.NoError(t, board.Publish(ctx, "gateway", fleethealth.Sample{At: time.Now(), BuyP99: 5 * time.Millisecond, Buys: 100, Lag: -1, LagBefore: -1}))
	}
	setLag := func(f func(int64) int64) {
		mu.Lock()
		lagBefore, lag = lag, f(lag)
		mu.Unlock()
	}
	publish()
	for _, a := range gateways {
		go func() { _ = a.Run(ctx) }()
	}
	admitter := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Interval: 50 * time.Millisecond,
		Targets: gateways[0].Targets(func(context.Context) ([]waitroom.Target, error) {
			return []waitroom.Target{{Line: line, Passes: -1}}, nil
		})})
	go func() { _ = admitter.Run(ctx) }()
	rate := func(a *waitroom.Adapter) int64 { return a.Line(line).AdmitPerSecond }
	// rates records the rate in force the fleet shares, every 20 ms, until
	// the phase's condition holds.
	phase := func(step func(int64) int64, done func(int64) bool) []int64 {
		var seen []int64
		require.Eventually(t, func() bool {
			setLag(step)
			publish()
			st, err := gateways[1].RateInForce(ctx, v.ID)
			require.NoError(t, err)
			seen = append(seen, st.Rate)
			return done(st.Rate) && rate(gateways[0]) == st.Rate && rate(gateways[1]) == st.Rate
		}, 20*time.Second, 20*time.Millisecond)
		return seen
	}

	phase(func(l int64) int64 { return l }, func(r int64) bool { return r == 400 })

	// Stalled: the lag grows by 20 every 20 ms.
	fall := phase(func(l int64) int64 { return l + 20 }, func(r int64) bool { return r == 20 })
	for i := 1; i < len(fall); i++ {
		require.LessOrEqual(t, fall[i], fall[i-1], "never rises while the workers are stalled: %v", fall)
	}
	require.Greater(t, fall[0], int64(20), "it fell: %v", fall)
	t.Logf("stalled, the rate every 20 ms: %v", compact(fall))

	// At the minimum: the admission slows to it. Over any window the room
	// admits at most the rate times the window plus a second's credit
	// (an upper bound, whatever the machine's pace).
	before, err := room.Stats(ctx, v.ID)
	require.NoError(t, err)
	t0 := redisNow(t, c)
	time.Sleep(time.Second)
	after, err := room.Stats(ctx, v.ID)
	require.NoError(t, err)
	window := redisNow(t, c).Sub(t0).Seconds()
	require.LessOrEqual(t, float64(after.Admitted-before.Admitted), 20*window+20+1,
		"admitted %d in %.2fs at 20/s", after.Admitted-before.Admitted, window)
	require.Greater(t, after.Waiting, int64(0), "the line still waits")

	// The metric and the estimated wait use the rate in force.
	require.Equal(t, 20.0, gaugeValue(t, reg, waitroom.MetricAdmitRate, "voucher_id", "140500"))
	waiting := int64(3000)
	st, err := room.Status(ctx, gateways[1].Line(line), waiting)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
	require.Equal(t, waitroom.ETA(waitroom.Line{AdmitPerSecond: 20, BeginAt: line.BeginAt}, st.Position, st.At), st.ETA)
	require.Greater(t, st.ETA, waitroom.ETA(line, st.Position, st.At), "the wait at 20/s is longer than at 400/s")

	// Recovered: the lag drains to nothing, then stays there.
	rise := phase(func(l int64) int64 { return max(0, l-200) }, func(r int64) bool { return r == 400 })
	for i := 1; i < len(rise); i++ {
		require.GreaterOrEqual(t, rise[i], rise[i-1], "never falls while the workers catch up: %v", rise)
	}
	require.Less(t, rise[0], int64(400), "it climbed: %v", rise)
	t.Logf("recovered, the rate every 20 ms: %v", compact(rise))
	require.Equal(t, 400.0, gaugeValue(t, reg, waitroom.MetricAdmitRate, "voucher_id", "140500"))
}

// compact is rates with each run of one value as one element.
func compact(rates []int64) []int64 {
	var out []int64
	for _, r := range rates {
		if len(out) == 0 || out[len(out)-1] != r {
			out = append(out, r)
		}
	}
	return out
}

// gaugeValue is the value of the gauge series name{label=value} in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

// The fleet keeps one rate per room, on a plain server and on a Redis
// Cluster: three gateways judging the same trouble at once make one cut
// a second, all three then admit at it,
// and a room whose admit_per_second the operator changed starts again
// from the new one.
func TestAdaptersShareOneRate(t *testing.T) {
	for name, rdb := range map[string]redis.UniversalClient{"plain": client(t), "cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			id := int64(140600)
			if name == "cluster" {
				id++
			}
			now, err := rdb.Time(ctx).Result()
			require.NoError(t, err)
			v := seckill.Voucher{ID: id, Kind: seckill.KindSeckill, BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
				WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 200,
					Adaptive: &seckill.Adaptive{TargetP99Ms: 50, MinPerSecond: 10, MaxPerSecond: 400}}}
			line, _ := waitroom.LineOf(v)
			var mu sync.Mutex
			vouchers := func(context.Context) ([]seckill.Voucher, error) {
				mu.Lock()
				defer mu.Unlock()
				return []seckill.Voucher{v}, nil
			}
			trouble := func(context.Context) (waitroom.Health, error) { return waitroom.Health{Breaker: 2}, nil }
			var gateways []*waitroom.Adapter
			for range 3 {
				a, err := waitroom.NewAdapter(waitroom.AdapterConfig{Redis: rdb, Vouchers: vouchers, Health: trouble,
					Rule: waitroom.Rule{SlowEvery: time.Second}})
				require.NoError(t, err)
				gateways = append(gateways, a)
			}
			tickAll := func() {
				var wg sync.WaitGroup
				for _, a := range gateways {
					wg.Go(func() { a.Tick(ctx) })
				}
				wg.Wait()
			}
			tickAll() // starts the rate at 200
			time.Sleep(1100 * time.Millisecond)
			for range 5 { // well within the second before the next cut
				tickAll()
			}
			st, err := gateways[0].RateInForce(ctx, id)
			require.NoError(t, err)
			require.EqualValues(t, 140, st.Rate, "one cut of 30%%, however many judged")
			for _, a := range gateways {
				require.EqualValues(t, 140, a.Line(line).AdmitPerSecond)
			}

			mu.Lock()
			v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: 300, Adaptive: v.WaitingRoom.Adaptive}
			mu.Unlock()
			tickAll()
			st, err = gateways[1].RateInForce(ctx, id)
			require.NoError(t, err)
			require.EqualValues(t, 300, st.Rate, "the operator's new admit_per_second")
			require.EqualValues(t, 300, st.Base)
		})
	}
}
