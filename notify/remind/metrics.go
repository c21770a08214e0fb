package remind

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the reminders' metric families (deploy/grafana's dashboard
// reads them).
const (
	// MetricTurns counts the turns this instance heard, by what became of
	// them: queued, dropped (the queue was full), used (bought or expired
	// before the delay was over: nobody to remind), unreachable (the
	// shopper gave no way to reach them), failed (their contacts could not
	// be read).
	MetricTurns = "seckill_remind_turns_total"
	// MetricSends counts the messages, by channel (push, email) and
	// result: sent, retried, gone (a push subscription deleted), failed
	// (given up).
	MetricSends = "seckill_remind_sends_total"
	// MetricQueued is the reminders waiting for their moment or a worker.
	MetricQueued = "seckill_remind_queued"
)

// metrics are a reminder's collectors; a nil *metrics records nothing.
type metrics struct {
	turns  *prometheus.CounterVec
	sends  *prometheus.CounterVec
	queued prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricTurns,
			Help: "Turns to buy heard by this instance, by outcome: queued, dropped, used, unreachable, failed."}, []string{"outcome"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricSends,
			Help: "Reminders sent, by channel (push, email) and result (sent, retried, gone, failed)."}, []string{"channel", "result"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricQueued,
			Help: "Reminders waiting for their moment or a worker on this instance."}),
	}
	for _, c := range []prometheus.Collector{m.turns, m.sends, m.queued} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("remind: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) turn(outcome string) {
	if m != nil {
		m.turns.WithLabelValues(outcome).Inc()
	}
}

func (m *metrics) send(channel, result string) {
	if m != nil {
		m.sends.WithLabelValues(channel, result).Inc()
	}
}

func (m *metrics) depth(n int) {
	if m != nil {
		m.queued.Set(float64(n))
	}
}
