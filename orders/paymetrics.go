package orders

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/seckill/orders/payment"
)

// PaymentMetrics count payments through a provider:
// seckill_payments_total{status}, seckill_payment_events_total{type,result},
// seckill_payment_late_refunds_total and
// seckill_payment_provider_errors_total{op}. A nil *PaymentMetrics records
// nothing.
type PaymentMetrics struct {
	payments, events, errors *prometheus.CounterVec
	late                     prometheus.Counter
}

// NewPaymentMetrics registers the collectors on reg.
func NewPaymentMetrics(reg prometheus.Registerer) (*PaymentMetrics, error) {
	m := &PaymentMetrics{
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payments_total",
			Help: "Payments through the provider that entered each status (pending: asked for; succeeded, failed, refunded: as the provider reported).",
		}, []string{"status"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_events_total",
			Help: "Provider events received with a valid signature, by type and result (applied, duplicate, stale, ignored, late_refund, rejected); invalid signatures are result invalid_signature.",
		}, []string{"type", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_payment_provider_errors_total",
			Help: "Calls to the payment provider that failed, by operation (create, retrieve, refund); each is retried.",
		}, []string{"op"}),
		late: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_payment_late_refunds_total",
			Help: "Payments that came after their order was cancelled (or paid otherwise) and were refunded automatically.",
		}),
	}
	for _, c := range []prometheus.Collector{m.payments, m.events, m.errors, m.late} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, s := range []payment.Status{payment.StatusPending, payment.StatusSucceeded, payment.StatusFailed, payment.StatusRefunded} {
		m.payments.WithLabelValues(string(s))
	}
	return m, nil
}

func (m *PaymentMetrics) payment(s payment.Status) {
	if m != nil {
		m.payments.WithLabelValues(string(s)).Inc()
	}
}

// event counts one provider event of type by result.
func (m *PaymentMetrics) event(typ, result string) {
	if m != nil {
		m.events.WithLabelValues(eventType(typ), result).Inc()
	}
}

// InvalidEvent counts one notification refused for its signature.
func (m *PaymentMetrics) InvalidEvent() {
	if m != nil {
		m.events.WithLabelValues("unknown", "invalid_signature").Inc()
	}
}

func (m *PaymentMetrics) lateRefund() {
	if m != nil {
		m.late.Inc()
	}
}

func (m *PaymentMetrics) providerError(op string) {
	if m != nil {
		m.errors.WithLabelValues(op).Inc()
	}
}

// eventType bounds the label's values: a provider has hundreds of event
// types, and the orders act on a few.
func eventType(t string) string {
	switch t {
	case "payment_intent.succeeded", "payment_intent.payment_failed", "charge.refunded", "active_query":
		return t
	}
	return "other"
}
