package waitroom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// The admitter tells OnStep every step it ran: what it admitted and how
// many still wait, so that the admitted so far plus the waiting are always
// everyone who joined.
func TestAdmitterTellsEveryStep(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140031, BeginAt: now, EndAt: now.Add(time.Hour), AdmitPerSecond: 20}
	for u := int64(1); u <= 10; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	var steps int
	var admitted int64
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room,
		Targets: func(context.Context) ([]waitroom.Target, error) {
			return []waitroom.Target{{Line: line, Passes: -1}}, nil
		},
		OnStep: func(id int64, s waitroom.Step) {
			require.Equal(t, line.VoucherID, id)
			steps++
			admitted += s.Admitted
			require.EqualValues(t, 10, admitted+s.Waiting, "step %d: %+v", steps, s)
		},
	})
	require.Eventually(t, func() bool { adm.Tick(ctx); return admitted == 10 }, 5*time.Second, 50*time.Millisecond)
	require.Positive(t, steps)
}

// The admitter's metrics tell each room's line and admissions: the
// admitted plus the waiting are everyone who joined, and a room gone from
// the targets leaves no series behind.
func TestAdmitterMetricsTellTheLine(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	room := waitroom.New(waitroom.Config{Redis: c, Secret: secret})
	now := redisNow(t, c)
	line := waitroom.Line{VoucherID: 140032, BeginAt: now, EndAt: now.Add(time.Hour), AdmitPerSecond: 20}
	for u := int64(1); u <= 12; u++ {
		_, err := room.Join(ctx, line, u)
		require.NoError(t, err)
	}
	reg := prometheus.NewRegistry()
	m, err := waitroom.NewAdmitMetrics(reg)
	require.NoError(t, err)
	targets := []waitroom.Target{{Line: line, Passes: -1}}
	adm := waitroom.NewAdmitter(waitroom.AdmitterConfig{Room: room, Metrics: m,
		Targets: func(context.Context) ([]waitroom.Target, error) { return targets, nil }})

	id := "140032"
	require.Eventually(t, func() bool {
		adm.Tick(ctx)
		waiting := gaugeValue(t, reg, waitroom.MetricWaiting, "voucher_id", id)
		admitted := counterValue(t, reg, waitroom.MetricAdmitted, id)
		require.Equal(t, 12.0, waiting+admitted, "the line and the admitted are everyone")
		return admitted == 12
	}, 5*time.Second, 50*time.Millisecond)
	require.Zero(t, gaugeValue(t, reg, waitroom.MetricWaiting, "voucher_id", id))

	targets = nil
	adm.Tick(ctx)
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Empty(t, fams, "a room gone from the catalog has no series")
}

// counterValue is the value of the counter series name{voucher_id=id}.
func counterValue(t *testing.T, reg *prometheus.Registry, name, id string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && m.GetLabel()[0].GetValue() == id {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{voucher_id=%q}", name, id)
	return 0
}
