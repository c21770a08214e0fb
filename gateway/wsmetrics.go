package gateway

// The seckill_ws_* metrics of GET /api/v1/ws and the labels they carry.

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons a socket was dropped, as the seckill_ws_dropped_total label.
const (
	dropSlow         = "slow"          // the hub's buffer filled (close 1013)
	dropReplaced     = "replaced"      // the user opened too many sockets (close 1008)
	dropIdle         = "idle"          // nothing heard within ReadTimeout
	dropWriteFailed  = "write_failed"  // a write failed or missed its deadline
	dropProtocol     = "protocol"      // a message that is not {"type":"ping"}, or too large
	dropResyncFailed = "resync_failed" // the snapshot after a hub resync could not be read (close 1011)
	dropAged         = "aged"          // a socket without a token reached Live.AnonymousMaxAge (close 1000)
	dropFlood        = "flood"         // the client sent past Live.MessageRate and MessageBurst (close 1008)
)

// Kinds of frames written, as the seckill_ws_messages_total label.
const (
	msgSnapshot = "snapshot"
	msgPush     = "push"
	msgPong     = "pong"
	msgVoucher  = "voucher" // a voucher's change (wsvouchers.go)
	msgResync   = "resync"  // a voucher frame sent to catch up after a full queue
)

// wsMetrics are the socket collectors, per Server (two gateways in one test
// never collide), registered on Deps.Registerer.
type wsMetrics struct {
	open     prometheus.Gauge
	messages *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	delay    prometheus.Histogram
	// Resolved once: the writer counts every frame.
	snapshots, pushes, pongs, vouchers, resyncs prometheus.Counter
}

func newWSMetrics(reg prometheus.Registerer) (*wsMetrics, error) {
	m := &wsMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seckill_ws_connections",
			Help: "Open WebSockets of GET /api/v1/ws.",
		}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ws_messages_total",
			Help: "Frames written to sockets, by kind: snapshot (on connect or resync), push (an order's status change), voucher (a voucher's change), resync (voucher frames after a full queue), pong.",
		}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_ws_dropped_total",
			Help: "Sockets the server closed on a client: slow (hub buffer full), replaced, idle, write_failed, protocol, resync_failed, aged (a socket without a token at its lifetime), flood (more messages than the socket's budget).",
		}, []string{"reason"}),
		// The frames carry no timestamp of the change, so this is the socket's
		// share of the delay; seckill_notify_push_delay_seconds is the share
		// before it (status change to the hub's hand-off).
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seckill_ws_push_delay_seconds",
			Help: "Time from the hub handing a status change to the socket's writer to the end of its write " +
				"(the change to the hand-off is seckill_notify_push_delay_seconds).",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
	}
	m.snapshots = m.messages.WithLabelValues(msgSnapshot)
	m.pushes = m.messages.WithLabelValues(msgPush)
	m.pongs = m.messages.WithLabelValues(msgPong)
	m.vouchers = m.messages.WithLabelValues(msgVoucher)
	m.resyncs = m.messages.WithLabelValues(msgResync)
	for _, r := range []string{dropSlow, dropReplaced, dropIdle, dropWriteFailed, dropProtocol, dropResyncFailed, dropAged, dropFlood} {
		m.dropped.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.open, m.messages, m.dropped, m.delay} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway: register WebSocket metrics: %w", err)
	}
	return m, nil
}
