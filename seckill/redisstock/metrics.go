package redisstock

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// script indexes the scripts the Store times.
type script int

const (
	scriptReserve script = iota
	scriptRelease
	scriptWarm
	scriptSnapshot
	scriptMove
	numScripts
)

// scriptNames are the values of the script label, by script.
var scriptNames = [numScripts]string{"reserve", "release", "warm", "snapshot", "move"}

// Metrics are the Redis stock's collectors: one histogram of script round
// trips, seckill_redis_script_duration_seconds{script}, whose children are
// resolved once, so timing a reservation costs a clock read and an atomic
// add. Build one per process with NewMetrics and give it to New with
// WithMetrics.
type Metrics struct {
	byScript [numScripts]prometheus.Observer
}

// scriptBuckets are in seconds: a script is sub-millisecond on an idle
// server; the tail shows queueing in the client pool or on the server.
var scriptBuckets = []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "seckill_redis_script_duration_seconds",
		Help:    "Round trip of one Lua script call (EVALSHA, then EVAL if the server lost the script), by script, as the client sees it: pool wait included.",
		Buckets: scriptBuckets,
	}, []string{"script"})
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	m := &Metrics{}
	for i, name := range scriptNames {
		m.byScript[i] = h.WithLabelValues(name)
	}
	return m, nil
}

// since records one call of sc that started at start. Safe on a nil
// receiver (no metrics).
func (m *Metrics) since(sc script, start time.Time) {
	if m == nil {
		return
	}
	m.byScript[sc].Observe(time.Since(start).Seconds())
}
