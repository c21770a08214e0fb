package notify

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/tracing"
)

// An event carries the trace of the change it tells (wireEvent.Trace): the
// order's own when a worker's batch persisted it (tracing.OrderSpan), else
// the span the publisher runs in (a pay or a cancel). The hub that pushes it
// to the buyer's sockets makes its span in that trace, so the push of a
// buy's "created" shows in the buy's trace, whichever instance holds the
// socket. Events from a publisher without tracing carry none, and a hub
// without a tracer ignores it.

// traceOf is the traceparent an event about o published under ctx carries.
func traceOf(ctx context.Context, o orders.Order) string {
	sc, ok := tracing.OrderSpan(ctx, o.ID)
	if !ok {
		sc = trace.SpanContextFromContext(ctx)
	}
	return tracing.Traceparent(sc)
}

// startPush starts the span of one event's push (nil without a tracer or
// a trace to join).
func (h *Hub) startPush(ev *wireEvent, userID int64) trace.Span {
	if h.opts.Tracer == nil || ev.Trace == "" {
		return nil
	}
	parent, ok := tracing.ParseTraceparent(ev.Trace)
	if !ok {
		return nil
	}
	_, span := h.opts.Tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), "notify push",
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.Int64("seckill.user_id", userID), attribute.String("seckill.order_id", ev.Order.OrderID),
			attribute.String("seckill.status", ev.Order.Status)))
	return span
}

// endPush ends a push's span with how many sockets got the frame.
func endPush(span trace.Span, delivered, dropped int) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.Int("notify.delivered", delivered), attribute.Int("notify.dropped", dropped))
	span.End()
}
