package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"go.opentelemetry.io/otel/trace"
)

// ordersKey keys the per-order trace contexts of a worker's batch.
type ordersKey struct{}

// WithOrders returns ctx carrying each order's own span context (by order
// id): a worker's batch runs under one span of its own, linked to every
// order's trace, and what it does for one order afterwards (the status push)
// goes back into that order's trace through OrderSpan.
func WithOrders(ctx context.Context, spans map[int64]trace.SpanContext) context.Context {
	if len(spans) == 0 {
		return ctx
	}
	return context.WithValue(ctx, ordersKey{}, spans)
}

// OrderSpan is the span context WithOrders gave orderID, if any.
func OrderSpan(ctx context.Context, orderID int64) (trace.SpanContext, bool) {
	m, _ := ctx.Value(ordersKey{}).(map[int64]trace.SpanContext)
	sc, ok := m[orderID]
	return sc, ok && sc.IsValid()
}

// Traceparent is sc as a W3C traceparent header value ("" when invalid).
func Traceparent(sc trace.SpanContext) string {
	c := propagation.MapCarrier{}
	Propagator().Inject(trace.ContextWithSpanContext(context.Background(), sc), c)
	return c[traceparent]
}

// ParseTraceparent reads a W3C traceparent value into a remote span
// context; ok is false for anything malformed, which callers treat as no
// parent at all.
func ParseTraceparent(v string) (trace.SpanContext, bool) {
	if v == "" {
		return trace.SpanContext{}, false
	}
	sc := trace.SpanContextFromContext(Propagator().Extract(context.Background(), propagation.MapCarrier{traceparent: v}))
	return sc, sc.IsValid()
}

// traceparent is the W3C header's name.
const traceparent = "traceparent"

// HeaderTraceparent is the header that carries a trace in and out of the
// gateway, and inside Kafka messages.
const HeaderTraceparent = traceparent
