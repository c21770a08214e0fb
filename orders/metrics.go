package orders

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the order domain's collectors: how long persisting a batch
// takes (seckill_persist_duration_seconds) and how many orders entered each
// status (seckill_orders_total{status}). Build one per process with
// NewMetrics. The Worker counts its own transitions (WorkerConfig.Metrics);
// the components that publish exactly one event per committed transition
// (Lifecycle, SyncBuyer, Reconciler) are counted by wrapping their Events
// with CountEvents. A nil *Metrics records nothing.
type Metrics struct {
	persist prometheus.Histogram
	// byStatus holds the counter of every status, resolved once.
	byStatus map[Status]prometheus.Counter
	// swept counts orders the sweeper cancelled at their pay_deadline;
	// reconciled counts orphaned holds the reconciler released.
	swept, reconciled prometheus.Counter
	// heals and healFailures count the healer's rebuilds by reason;
	// healTime is how long each voucher was off sale for one.
	heals, healFailures *prometheus.CounterVec
	healTime            prometheus.Histogram
}

// NewMetrics registers the collectors on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	persist := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "seckill_persist_duration_seconds",
		Help:    "One PostgreSQL transaction persisting a batch of reservations (the workers' PersistBatch).",
		Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
	})
	transitions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_orders_total",
		Help: "Orders that entered each status (created, paid, cancelled, failed, refunded), counted once per committed transition.",
	}, []string{"status"})
	swept := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_sweeper_cancelled_total",
		Help: "Unpaid orders the sweeper cancelled at their pay_deadline, stock put back on sale.",
	})
	reconciled := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "seckill_reconciler_released_total",
		Help: "Reservations held in Redis with no order and no message in flight that the reconciler released.",
	})
	heals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_heals_total",
		Help: "Vouchers whose Redis state the healer rebuilt from PostgreSQL without an operator, by reason: missing (no meta: lost, wiped) or drift (Redis disagreed with PostgreSQL beyond what is in flight, on several checks in a row).",
	}, []string{"reason"})
	healFailures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_heal_failures_total",
		Help: "Heals that did not finish (the voucher stays off sale and the next pass tries again), by reason.",
	}, []string{"reason"})
	healTime := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "seckill_heal_duration_seconds",
		Help:    "How long one heal kept its voucher off sale: waiting for the messages in flight, then the rebuild.",
		Buckets: []float64{.5, 1, 2, 5, 10, 15, 20, 30, 60, 120},
	})
	for _, c := range []prometheus.Collector{persist, transitions, swept, reconciled, heals, healFailures, healTime} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m := &Metrics{persist: persist, byStatus: map[Status]prometheus.Counter{}, swept: swept, reconciled: reconciled,
		heals: heals, healFailures: healFailures, healTime: healTime}
	for _, r := range []string{HealMissing, HealDrift} {
		heals.WithLabelValues(r)
		healFailures.WithLabelValues(r)
	}
	for _, s := range []Status{StatusCreated, StatusPaid, StatusCancelled, StatusFailed, StatusRefunded} {
		m.byStatus[s] = transitions.WithLabelValues(string(s))
	}
	return m, nil
}

// persisted records one PersistBatch call that began at start.
func (m *Metrics) persisted(start time.Time) {
	if m == nil {
		return
	}
	m.persist.Observe(time.Since(start).Seconds())
}

// entered counts n orders entering status s. Reserved is not a persisted
// status and is not counted here (the gateway counts accepted buys).
func (m *Metrics) entered(s Status, n int) {
	if m == nil || n == 0 {
		return
	}
	if c, ok := m.byStatus[s]; ok {
		c.Add(float64(n))
	}
}

// sweptOrders counts n orders the sweeper cancelled.
func (m *Metrics) sweptOrders(n int) {
	if m != nil && n > 0 {
		m.swept.Add(float64(n))
	}
}

// reconciledHolds counts n holds the reconciler released.
func (m *Metrics) reconciledHolds(n int) {
	if m != nil && n > 0 {
		m.reconciled.Add(float64(n))
	}
}

// healed records one heal of reason that kept its voucher off sale for took.
func (m *Metrics) healed(reason string, took time.Duration) {
	if m != nil {
		m.heals.WithLabelValues(reason).Inc()
		m.healTime.Observe(took.Seconds())
	}
}

// healFailed records one heal of reason that did not finish.
func (m *Metrics) healFailed(reason string) {
	if m != nil {
		m.healFailures.WithLabelValues(reason).Inc()
	}
}

// CountEvents returns events that also counts each published order's status
// as one transition. Use it only for publishers that publish once per
// committed transition (Lifecycle, SyncBuyer, Reconciler), not for the
// Worker, which republishes on redelivery. events may be nil: the result
// then only counts. A nil m returns events unchanged.
func (m *Metrics) CountEvents(events Events) Events {
	if m == nil {
		return events
	}
	return countingEvents{m: m, next: events}
}

type countingEvents struct {
	m    *Metrics
	next Events
}

// Publish counts the transition, then passes the event on. The count does
// not depend on the publish succeeding: the transition is committed.
func (c countingEvents) Publish(ctx context.Context, e Event) error {
	c.m.entered(e.Order.Status, 1)
	if c.next == nil {
		return nil
	}
	return c.next.Publish(ctx, e)
}
