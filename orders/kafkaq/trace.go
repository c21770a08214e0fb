package kafkaq

import (
	"context"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/tracing"
)

// A reservation's trace travels in its message's headers as a W3C
// traceparent (tracing.HeaderTraceparent), never in its value: the value is
// the reservation, and a message written before tracing existed, or by a
// producer without it, has no header and is read as before (its process
// span starts a trace of its own). Dead letters keep the header, and a
// replay carries it back, so a replayed order stays in its buy's trace.

// WithTracer makes the producer write a span for each publish and carry it
// in the message's traceparent header.
func WithTracer(t trace.Tracer) ProducerOption {
	return func(p *Producer) { p.tracer = t }
}

// startPublish starts the publish's span and puts its traceparent on msg.
func (p *Producer) startPublish(ctx context.Context, msg *sarama.ProducerMessage, r seckill.Reservation) trace.Span {
	if p.tracer == nil {
		return nil
	}
	_, span := p.tracer.Start(ctx, p.topic+" publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", p.topic),
			attribute.Int64("seckill.order_id", r.OrderID)))
	msg.Headers = append(msg.Headers, sarama.RecordHeader{
		Key: []byte(tracing.HeaderTraceparent), Value: []byte(tracing.Traceparent(span.SpanContext())),
	})
	return span
}

// endSpan ends span (nil: none) failed by err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// parentOf is the span context msg's traceparent header names (invalid
// when it has none, or a malformed one).
func parentOf(msg *sarama.ConsumerMessage) trace.SpanContext {
	for _, h := range msg.Headers {
		if h != nil && string(h.Key) == tracing.HeaderTraceparent {
			sc, _ := tracing.ParseTraceparent(string(h.Value))
			return sc
		}
	}
	return trace.SpanContext{}
}

// messageContext is ctx in the trace msg's header names, when it has one:
// what is logged about one message (a dead letter, a reservation that
// cannot be handled) carries its buy's trace id, tracing on or off.
func messageContext(ctx context.Context, msg *sarama.ConsumerMessage) context.Context {
	if parent := parentOf(msg); parent.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return ctx
}

// batchSpans are the spans of one batch being collected: one per message,
// in its buy's trace (from its receipt to its commit), and, while the
// handler runs, one of the batch itself, linked to each.
type batchSpans struct {
	t     trace.Tracer
	topic string
	msgs  []trace.Span
	ids   map[int64]trace.SpanContext
}

// received starts the span of a message of order r.
func (b *batchSpans) received(msg *sarama.ConsumerMessage, r seckill.Reservation) {
	if b.t == nil {
		return
	}
	ctx := context.Background()
	if parent := parentOf(msg); parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	_, span := b.t.Start(ctx, b.topic+" process", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.destination.name", b.topic),
			attribute.Int("messaging.destination.partition.id", int(msg.Partition)),
			attribute.Int64("messaging.kafka.offset", msg.Offset),
			attribute.Int64("seckill.order_id", r.OrderID)))
	b.msgs = append(b.msgs, span)
	if b.ids == nil {
		b.ids = make(map[int64]trace.SpanContext)
	}
	b.ids[r.OrderID] = span.SpanContext()
}

// handling starts the batch's span under ctx, linked to every message's
// span, and returns the context the handler runs in: the batch's span, and
// each order's span context for what the handler does for one order
// (tracing.WithOrders).
func (b *batchSpans) handling(ctx context.Context, partition int32) (context.Context, trace.Span) {
	if b.t == nil || len(b.msgs) == 0 {
		return ctx, nil
	}
	links := make([]trace.Link, len(b.msgs))
	for i, s := range b.msgs {
		links[i] = trace.Link{SpanContext: s.SpanContext()}
	}
	ctx, span := b.t.Start(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), "orders batch",
		trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("messaging.destination.name", b.topic),
			attribute.Int("messaging.destination.partition.id", int(partition)),
			attribute.Int("messaging.batch.message_count", len(b.msgs))))
	return tracing.WithOrders(ctx, b.ids), span
}

// done ends every message's span, failed by err, and forgets them.
func (b *batchSpans) done(err error) {
	for _, s := range b.msgs {
		endSpan(s, err)
	}
	b.msgs, b.ids = nil, nil
}
