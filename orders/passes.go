package orders

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Passes records when the background loops (sweeper, reconciler) last
// finished a pass without an error, as unix-time gauges, so an alert can
// tell a loop that stopped or keeps failing from one with nothing to do. A
// nil *Passes records nothing.
type Passes struct {
	sweeper, reconciler prometheus.Gauge
}

// NewPasses registers seckill_sweeper_last_success_timestamp_seconds and
// seckill_reconciler_last_success_timestamp_seconds on reg.
func NewPasses(reg prometheus.Registerer) (*Passes, error) {
	p := &Passes{
		sweeper: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_sweeper_last_success_timestamp_seconds",
			Help: "Unix time of this process's last sweeper pass (payment timeouts and the release outbox) that met no error; 0 before the first.",
		}),
		reconciler: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_reconciler_last_success_timestamp_seconds",
			Help: "Unix time of this process's last reconciler pass over the active vouchers that met no error; 0 before the first.",
		}),
	}
	for _, c := range []prometheus.Collector{p.sweeper, p.reconciler} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *Passes) swept(at time.Time) {
	if p != nil {
		p.sweeper.Set(float64(at.UnixNano()) / 1e9)
	}
}

func (p *Passes) reconciled(at time.Time) {
	if p != nil {
		p.reconciler.Set(float64(at.UnixNano()) / 1e9)
	}
}
