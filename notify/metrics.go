package notify

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a subscription ends other than its own Close, as metric labels.
const (
	dropSlow     = "slow"     // its buffer filled: the client does not keep up
	dropReplaced = "replaced" // the user opened more than MaxPerUser subscriptions
	dropRefused  = "refused"  // the hub was at MaxSubscriptions
)

// Results of one event read from a shard channel (one per element of an
// array message), as metric labels.
const (
	eventDelivered    = "delivered"     // handed to at least one subscription here
	eventNoSubscriber = "no_subscriber" // its buyer has no socket on this instance
	eventBad          = "bad"           // not a well-formed event
)

// metrics are the hub's collectors. They are created per hub and registered
// on the Registerer the caller passes, never on the global registry, so two
// hubs (two gateways in one test) never collide.
type metrics struct {
	pushes     prometheus.Counter
	drops      *prometheus.CounterVec
	open       prometheus.Gauge
	delay      prometheus.Histogram
	events     *prometheus.CounterVec
	reconnects prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_notify_pushes_total",
			Help: "Order frames handed to a subscriber (one per event per open socket of its buyer).",
		}),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_notify_drops_total",
			Help: "Subscriptions the hub ended: slow (buffer full), replaced (over the per-user cap), refused (hub full).",
		}, []string{"reason"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_notify_subscriptions",
			Help: "Open subscriptions (one per open socket).",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_notify_push_delay_seconds",
			Help: "Time from the status change (event's at) to its frame being handed to the subscriber.",
			Buckets: []float64{
				.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5,
			},
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_notify_events_total",
			Help: "Events read from the Redis shard channels (each event of a batch's message counts), by result.",
		}, []string{"result"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_notify_reconnects_total",
			Help: "Times the hub re-subscribed to Redis after losing its connection (events in the gap are lost).",
		}),
	}
	// Pre-create the label values so dashboards show zeros, not gaps.
	for _, r := range []string{dropSlow, dropReplaced, dropRefused} {
		m.drops.WithLabelValues(r)
	}
	for _, r := range []string{eventDelivered, eventNoSubscriber, eventBad} {
		m.events.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.pushes, m.drops, m.open, m.delay, m.events, m.reconnects} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("notify: register metrics: %w", err)
	}
	return m, nil
}
