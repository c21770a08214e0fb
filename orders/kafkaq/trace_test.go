package kafkaq_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/testlog"
	"github.com/flashsale/seckill/seckill/tracing"
)

// spanOf is the ended span named name whose seckill.order_id is orderID.
func spanOf(rec *tracetest.SpanRecorder, name string, orderID int64) sdktrace.ReadOnlySpan {
	for _, s := range rec.Ended() {
		if s.Name() != name {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "seckill.order_id" && a.Value.AsInt64() == orderID {
				return s
			}
		}
	}
	return nil
}

// A buy's trace travels in its message's traceparent header: the worker's
// span of the message is a child of the publish, its batch is linked to it,
// and the handler finds each order's span context. A message without the
// header (written before tracing, or by a producer without it) is handled
// as before, under a trace of its own. A dead letter keeps the header, and
// its replay carries it back into the buy's trace.
func TestTraceparentTravelsInHeaders(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		rec := tracetest.NewSpanRecorder()
		prov := tracing.NewWithProcessor(1, 0, rec)
		t.Cleanup(func() { _ = prov.Shutdown(context.Background()) })
		tr := prov.Tracer()

		topic := k.newTopic(t, 1)
		dlqTopic := topic + kafkaq.DeadLetterSuffix
		if k.dropTopic != nil {
			t.Cleanup(func() { k.dropTopic(dlqTopic) })
		}
		p, err := kafkaq.NewProducer(k.brokers, topic, testLog(t), kafkaq.WithTracer(tr))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, p.Close()) })

		ctx, buy := tr.Start(context.Background(), "buy")
		require.NoError(t, p.Publish(ctx, reservation(1, 1)))
		buy.End()
		raw, err := sarama.NewSyncProducer(k.brokers, kafkaq.ProducerConfig())
		require.NoError(t, err)
		defer raw.Close()
		old, err := json.Marshal(reservation(2, 1))
		require.NoError(t, err)
		_, _, err = raw.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder("1"), Value: sarama.ByteEncoder(old)})
		require.NoError(t, err)
		ctx3, buy3 := tr.Start(context.Background(), "buy")
		require.NoError(t, p.Publish(ctx3, reservation(3, 1)))
		buy3.End()

		var mu sync.Mutex
		seen := map[int64]trace.SpanContext{} // each order's span context as the handler found it
		batches := map[int64]trace.SpanContext{}
		poisoned := true
		handler := func(ctx context.Context, batch []seckill.Reservation) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range batch {
				if r.OrderID == 3 && poisoned {
					return errors.New("row refused: a bug, not an outage")
				}
			}
			for _, r := range batch {
				seen[r.OrderID], _ = tracing.OrderSpan(ctx, r.OrderID)
				batches[r.OrderID] = trace.SpanContextFromContext(ctx)
			}
			return nil
		}
		dl, err := kafkaq.NewDeadLetters(k.brokers, dlqTopic)
		require.NoError(t, err)
		t.Cleanup(func() { _ = dl.Close() })
		logs := &testlog.Buffer{}
		cfg := kafkaq.ConsumerConfig{Topic: topic, Group: "g-" + topic, DeadLetters: dl, DeadLetterAfter: 2, Tracer: tr,
			Log:          slog.New(tracing.LogHandler(slog.NewJSONHandler(logs, nil))),
			RetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond}
		_, stop := run(t, k, cfg, handler)
		require.Eventually(t, func() bool { return committed(t, k, cfg.Group, topic, 1)[0] == 3 }, 30*time.Second, 50*time.Millisecond)
		stop()

		pub1, proc1 := spanOf(rec, topic+" publish", 1), spanOf(rec, topic+" process", 1)
		require.NotNil(t, pub1)
		require.NotNil(t, proc1)
		assert.Equal(t, buy.SpanContext().TraceID(), proc1.SpanContext().TraceID(), "the worker's span is in the buy's trace")
		assert.Equal(t, pub1.SpanContext().SpanID(), proc1.Parent().SpanID(), "a child of the publish, from the header")
		assert.True(t, proc1.Parent().IsRemote())
		mu.Lock()
		assert.Equal(t, proc1.SpanContext(), seen[1], "the handler finds the order's span")
		batch1 := batches[1]
		mu.Unlock()
		var batchSpan sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == "orders batch" && s.SpanContext().SpanID() == batch1.SpanID() {
				batchSpan = s
			}
		}
		require.NotNil(t, batchSpan, "the handler ran under the batch's span")
		assert.False(t, batchSpan.Parent().IsValid(), "a batch is a trace of its own")
		var linked []trace.SpanID
		for _, l := range batchSpan.Links() {
			linked = append(linked, l.SpanContext.SpanID())
		}
		assert.Contains(t, linked, proc1.SpanContext().SpanID(), "linked to each order's span")

		proc2 := spanOf(rec, topic+" process", 2)
		require.NotNil(t, proc2, "a message without the header is handled as before")
		assert.False(t, proc2.Parent().IsValid(), "under a new root span")
		assert.NotEqual(t, buy.SpanContext().TraceID(), proc2.SpanContext().TraceID())

		letters, err := kafkaq.ListDeadLetters(context.Background(), k.brokers, dlqTopic)
		require.NoError(t, err)
		require.Len(t, letters, 1)
		pub3 := spanOf(rec, topic+" publish", 3)
		require.NotNil(t, pub3)
		assert.Equal(t, tracing.Traceparent(pub3.SpanContext()), letters[0].Traceparent, "the dead letter keeps the header")
		var deadLine map[string]any
		for _, l := range logs.JSONLines(t) {
			if strings.HasPrefix(l["msg"].(string), "message dead-lettered") {
				deadLine = l
			}
		}
		require.NotNil(t, deadLine, "%s", logs)
		assert.Equal(t, buy3.SpanContext().TraceID().String(), deadLine["trace_id"], "the dead letter's log line names its buy's trace")

		mu.Lock()
		poisoned = false
		mu.Unlock()
		_, err = kafkaq.ReplayDeadLetter(context.Background(), k.brokers, dlqTopic, topic, letters[0].Partition, letters[0].Offset)
		require.NoError(t, err)
		_, stop = run(t, k, cfg, handler)
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return seen[3].IsValid()
		}, 30*time.Second, 20*time.Millisecond)
		stop()
		mu.Lock()
		assert.Equal(t, buy3.SpanContext().TraceID(), seen[3].TraceID(), "the replay is back in its buy's trace")
		mu.Unlock()
	})
}
