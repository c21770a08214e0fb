package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/tracing"
)

// The push of an order's change is a span in that order's trace: the one a
// worker's batch knows for the order (tracing.OrderSpan), else the one the
// publisher runs in (a pay, a cancel). An event without a trace makes none.
func TestPushJoinsTheOrdersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prov := tracing.NewWithProcessor(1, 0, rec)
	t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
	hub, _ := startHub(t, notify.HubConfig{Tracer: prov.Tracer()})
	pub := notify.NewPublisher(newRedis(t))
	sub := hub.Subscribe(201)
	defer sub.Close()

	pushOf := func(orderID string) sdktrace.ReadOnlySpan {
		for _, s := range rec.Ended() {
			for _, a := range s.Attributes() {
				if s.Name() == "notify push" && a.Key == "seckill.order_id" && a.Value.AsString() == orderID {
					return s
				}
			}
		}
		return nil
	}
	waitPush := func(orderID string) sdktrace.ReadOnlySpan {
		var s sdktrace.ReadOnlySpan
		require.Eventually(t, func() bool { s = pushOf(orderID); return s != nil }, 5*time.Second, 5*time.Millisecond)
		return s
	}

	// A worker's batch: its own span, and each order's span from Kafka.
	// Both orders are the buyer's, so they travel in one message (an
	// array), and each push still joins its own order's trace.
	orderSpan, _ := tracing.ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	otherSpan, _ := tracing.ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	ctx, batch := prov.Tracer().Start(context.Background(), "orders batch")
	ctx = tracing.WithOrders(ctx, map[int64]trace.SpanContext{7001: orderSpan, 7003: otherSpan})
	require.NoError(t, pub.PublishBatch(ctx, []orders.Event{
		{Order: order(7001, 201, orders.StatusCreated), At: time.Now()},
		{Order: order(7003, 201, orders.StatusCreated), At: time.Now()},
	}))
	batch.End()
	next(t, sub)
	next(t, sub)
	for id, sc := range map[string]trace.SpanContext{"7001": orderSpan, "7003": otherSpan} {
		push := waitPush(id)
		assert.Equal(t, sc.TraceID(), push.SpanContext().TraceID(), "order %s: in the order's trace, not the batch's", id)
		assert.Equal(t, sc.SpanID(), push.Parent().SpanID(), id)
	}

	// A pay: the request's span.
	ctx, pay := prov.Tracer().Start(context.Background(), "POST /api/v1/orders/:id/pay")
	require.NoError(t, pub.Publish(ctx, orders.Event{Order: order(7001, 201, orders.StatusPaid), At: time.Now()}))
	pay.End()
	next(t, sub)
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "notify push" && s.Parent().SpanID() == pay.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "the pay's push is a child of the pay")

	// No trace: no span, and the frame all the same.
	publish(t, pub, order(7002, 201, orders.StatusCreated))
	f := next(t, sub)
	assert.Equal(t, "7002", f.Order.OrderID)
	assert.Nil(t, pushOf("7002"))
}
