package waitroom

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Names of the admitter's metric families (deploy/grafana's dashboard and
// deploy/helm/seckill's autoscaling of the gateways read them).
const (
	// MetricWaiting is each room's line: the shoppers still waiting after
	// this instance's latest step of it. Every gateway steps every room,
	// so each tells the whole line; the fleet's figure is the max.
	MetricWaiting = "seckill_room_waiting"
	// MetricAdmitted counts the shoppers this instance's steps admitted.
	// The clock is shared, so an admission is counted by exactly one
	// instance: the fleet's admissions are the sum.
	MetricAdmitted = "seckill_room_admitted_total"
	// MetricExpired counts the passes this instance's steps expired unused.
	MetricExpired = "seckill_room_expired_total"
)

// AdmitMetrics are an admitter's collectors: each room's line and
// admissions (MetricWaiting, MetricAdmitted, MetricExpired). A nil
// *AdmitMetrics records nothing.
type AdmitMetrics struct {
	waiting  *prometheus.GaugeVec
	admitted *prometheus.CounterVec
	expired  *prometheus.CounterVec
}

// NewAdmitMetrics makes the admitter's collectors and registers them on reg.
func NewAdmitMetrics(reg prometheus.Registerer) (*AdmitMetrics, error) {
	m := &AdmitMetrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricWaiting,
			Help: "Shoppers still waiting in each room's line after this instance's latest admission step (every gateway steps every room: take the max).",
		}, []string{"voucher_id"}),
		admitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAdmitted,
			Help: "Shoppers admitted from each room's line by this instance's steps (each admission is counted by one instance: take the sum).",
		}, []string{"voucher_id"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricExpired,
			Help: "Admission passes of each room that expired unused in this instance's steps; each place went to the next in line.",
		}, []string{"voucher_id"}),
	}
	for _, c := range []prometheus.Collector{m.waiting, m.admitted, m.expired} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("waitroom: admitter metrics: %w", err)
		}
	}
	return m, nil
}

// step records one admission step of a room.
func (m *AdmitMetrics) step(voucherID int64, s Step) {
	if m == nil {
		return
	}
	id := strconv.FormatInt(voucherID, 10)
	m.waiting.WithLabelValues(id).Set(float64(s.Waiting))
	m.admitted.WithLabelValues(id).Add(float64(s.Admitted))
	m.expired.WithLabelValues(id).Add(float64(s.Expired))
}

// forget drops a room gone from the catalog, so the series stay bounded.
func (m *AdmitMetrics) forget(voucherID int64) {
	if m == nil {
		return
	}
	id := strconv.FormatInt(voucherID, 10)
	m.waiting.DeleteLabelValues(id)
	m.admitted.DeleteLabelValues(id)
	m.expired.DeleteLabelValues(id)
}
