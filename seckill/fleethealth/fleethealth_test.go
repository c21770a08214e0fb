package fleethealth_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/fleethealth"
)

// A window's p99 is read from the difference of two reads of a cumulative
// histogram: the observations before the window do not count.
func TestWindowQuantileOfTheWindowOnly(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: []float64{.01, .05, .1, 1}})
	read := func() *dto.Histogram {
		var m dto.Metric
		require.NoError(t, h.Write(&m))
		return m.GetHistogram()
	}
	var w fleethealth.Window
	for range 100 {
		h.Observe(0.5) // slow, before the window
	}
	n, p99 := w.Next(read(), 0.99)
	require.EqualValues(t, 100, n)
	require.Equal(t, time.Second, p99)

	for range 99 {
		h.Observe(0.005)
	}
	h.Observe(0.07)
	n, p99 = w.Next(read(), 0.99)
	require.EqualValues(t, 100, n)
	require.Equal(t, 10*time.Millisecond, p99, "99 of 100 under 10 ms")

	n, p99 = w.Next(read(), 0.99)
	require.Zero(t, n)
	require.Zero(t, p99, "nothing in the window")

	h.Observe(5)
	_, p99 = w.Next(read(), 0.99)
	require.Equal(t, time.Second, p99, "past every bound: the highest")
}
