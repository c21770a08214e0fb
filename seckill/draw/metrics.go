package draw

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the drawer's metric families (deploy/grafana's dashboard reads
// them).
const (
	// MetricDraws counts the draws this instance tried: drawn (it seated
	// the draw; every draw is seated by one instance), failed (a lost or
	// refused draw, told in the log), open_failed (its commitment could not
	// be set when the window opened).
	MetricDraws = "seckill_draws_total"
	// MetricEntries and MetricWinners count the entries ranked and the
	// winners of the draws this instance seated.
	MetricEntries = "seckill_draw_entries_total"
	MetricWinners = "seckill_draw_winners_total"
)

// Outcomes of MetricDraws.
const (
	OutcomeDrawn      = "drawn"
	OutcomeFailed     = "failed"
	OutcomeOpenFailed = "open_failed"
	// OutcomeVoid counts draws found void: their entries were lost
	// before the draw, which is never made again.
	OutcomeVoid = "void"
)

// Metrics are a drawer's collectors. A nil *Metrics records nothing.
type Metrics struct {
	draws            *prometheus.CounterVec
	entries, winners prometheus.Counter
}

// NewMetrics makes the drawer's collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		draws: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDraws,
			Help: "Draws this instance tried, by outcome: drawn (seated here, once fleet-wide), failed (lost or refused), open_failed (the commitment not set).",
		}, []string{"outcome"}),
		entries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricEntries,
			Help: "Entries ranked by the draws this instance seated.",
		}),
		winners: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricWinners,
			Help: "Winners of the draws this instance seated.",
		}),
	}
	// Every outcome from the start, so a rate reads 0, not nothing.
	for _, o := range []string{OutcomeDrawn, OutcomeFailed, OutcomeOpenFailed, OutcomeVoid} {
		m.draws.WithLabelValues(o)
	}
	for _, c := range []prometheus.Collector{m.draws, m.entries, m.winners} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("draw: metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) outcome(o string) {
	if m != nil {
		m.draws.WithLabelValues(o).Inc()
	}
}

func (m *Metrics) drew(entries, winners int) {
	if m != nil {
		m.draws.WithLabelValues(OutcomeDrawn).Inc()
		m.entries.Add(float64(entries))
		m.winners.Add(float64(winners))
	}
}
