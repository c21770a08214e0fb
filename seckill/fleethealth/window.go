package fleethealth

import (
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Window turns a cumulative Prometheus histogram into the quantiles of the
// observations since its last call: the fleet already times every answer,
// and the window's p99 is the difference of two reads of it. Not safe for
// concurrent use; one per series.
type Window struct {
	count   uint64
	buckets []uint64
}

// Next is how many observations h gained since the last call and their
// q-quantile, taken as the upper bound of the bucket it falls in (0 when
// none; the highest bound when it falls past every bound). The first call
// counts everything h holds.
func (w *Window) Next(h *dto.Histogram, q float64) (n int64, quantile time.Duration) {
	if h == nil {
		return 0, 0
	}
	count := h.GetSampleCount()
	bs := h.GetBucket()
	prev := w.buckets
	if len(prev) != len(bs) || count < w.count {
		// A new or reset series: everything counts.
		prev, w.count = make([]uint64, len(bs)), 0
	}
	n = int64(count - w.count)
	cur := make([]uint64, len(bs))
	for i, b := range bs {
		cur[i] = b.GetCumulativeCount()
	}
	w.count, w.buckets = count, cur
	if n <= 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	for i, b := range bs {
		if cur[i]-prev[i] >= rank {
			return n, time.Duration(b.GetUpperBound() * float64(time.Second))
		}
	}
	if len(bs) == 0 {
		return n, 0
	}
	return n, time.Duration(bs[len(bs)-1].GetUpperBound() * float64(time.Second))
}
