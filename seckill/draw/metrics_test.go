package draw_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
)

// Two drawers race for one beacon draw: it is seated once, so the fleet's
// drawn count is 1 and the entries and winners are counted once, by the one
// that seated it.
func TestDrawersCountADrawOnce(t *testing.T) {
	ctx := context.Background()
	rdb := stack.Redis(t)
	pool := stack.NewDatabase(t)
	first := newInstance(t, rdb, pool)
	v, l := drawVoucher(t, first, 270901, 1500*time.Millisecond)
	for u := int64(1); u <= 5; u++ {
		_, err := first.draws.Enter(ctx, l, u)
		require.NoError(t, err)
	}

	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	var drawers []*draw.Drawer
	for _, reg := range regs {
		m, err := draw.NewMetrics(reg)
		require.NoError(t, err)
		other := newInstance(t, stack.Redis(t), pool)
		drawers = append(drawers, draw.NewDrawer(draw.DrawerConfig{Draws: other.draws, Metrics: m,
			Targets: func(context.Context) ([]draw.Target, error) {
				return []draw.Target{{Line: l, Voucher: v, Stock: 2, PerUserLimit: 1}}, nil
			}}))
	}
	untilBegun(t, rdb, l)
	// The drawers tick until the round is out and one of them has drawn.
	drawn := func() float64 {
		n := 0.0
		for _, reg := range regs {
			fams, err := reg.Gather()
			require.NoError(t, err)
			for _, f := range fams {
				for _, m := range f.GetMetric() {
					if f.GetName() == draw.MetricDraws && m.GetLabel()[0].GetValue() == draw.OutcomeDrawn {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	deadline := time.Now().Add(30 * time.Second)
	for drawn() == 0 {
		require.True(t, time.Now().Before(deadline), "no drawer drew in time")
		for _, d := range drawers {
			d.Tick(ctx)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range drawers {
		d.Tick(ctx)
	}

	sum := map[string]float64{}
	for _, reg := range regs {
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, lp := range m.GetLabel() {
					key += "/" + lp.GetValue()
				}
				sum[key] += m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, map[string]float64{
		draw.MetricDraws + "/" + draw.OutcomeDrawn:      1,
		draw.MetricDraws + "/" + draw.OutcomeFailed:     0,
		draw.MetricDraws + "/" + draw.OutcomeOpenFailed: 0,
		draw.MetricDraws + "/" + draw.OutcomeVoid:       0,
		draw.MetricEntries:                              5,
		draw.MetricWinners:                              2,
	}, sum)
}
