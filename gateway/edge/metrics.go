package edge

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// metrics are the edge's collectors, registered on the Registerer given to
// New (never the global registry).
type metrics struct {
	allowed     *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		allowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_gate_allowed_total",
			Help: "Attempts a gate let through, by gate.",
		}, []string{"gate"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_gate_rejections_total",
			Help: "Attempts a gate refused (or, reason error, let through because it could not judge), by gate and reason.",
		}, []string{"gate", "reason"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "seckill_breaker_state",
			Help: "This instance's circuit breaker of each dependency path (redis: seckill buys, postgresql: limit and common buys): 0 closed, 1 half-open, 2 open (forced modes included).",
		}, []string{"path"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_breaker_transitions_total",
			Help: "Circuit breaker state changes, by path, from and to state.",
		}, []string{"path", "from", "to"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.allowed, m.rejected, m.state, m.transitions} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) allow(gate string)          { m.allowed.WithLabelValues(gate).Inc() }
func (m *metrics) reject(gate, reason string) { m.rejected.WithLabelValues(gate, reason).Inc() }

// stateValue is the gauge's number for a gobreaker state.
func stateValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}
