package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/flashsale/seckill/seckill/tracing"
)

// edgeParent is a sampled traceparent as a proxy in front of the gateway
// would send it.
const edgeParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tracedSetup is a gateway whose tracer records into the returned recorder
// (every trace kept), and whose log lines carry trace ids as the process's
// do (cmd/seckill/app).
func tracedSetup(t testing.TB, ratio float64, next sdktrace.SpanProcessor) *bundle {
	p := tracing.NewWithProcessor(ratio, 0, next)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return setup(t, func(_ *Config, d *testDeps) {
		d.Tracer = p.Tracer()
		d.Logger = slog.New(tracing.LogHandler(d.Logger.Handler()))
	})
}

func TestTraceparentJoinsTheBuyToTheEdgesTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	b := tracedSetup(t, 0, rec)

	resp, body := b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID), `{"quantity":1}`,
		"Authorization", "Bearer "+b.shopper, "traceparent", edgeParent)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", body)

	back, ok := tracing.ParseTraceparent(resp.Header.Get("traceparent"))
	require.True(t, ok, "the answer carries a traceparent: %q", resp.Header.Get("traceparent"))
	edge, _ := tracing.ParseTraceparent(edgeParent)
	assert.Equal(t, edge.TraceID(), back.TraceID(), "the same trace as the edge's")
	assert.NotEqual(t, edge.SpanID(), back.SpanID(), "the gateway's own span, not the edge's")
	assert.True(t, back.IsSampled(), "the edge sampled it, so the gateway keeps it whatever its ratio (0 here)")

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	server := spans["POST /api/v1/vouchers/:id/orders"]
	require.NotNil(t, server, "the request's span, named by its route: %v", names(rec.Ended()))
	assert.Equal(t, edge.SpanID(), server.Parent().SpanID(), "child of the edge's span")
	assert.Equal(t, back.SpanID(), server.SpanContext().SpanID(), "the traceparent answered is the request's span")
	for child, parent := range map[string]string{"buy": server.Name(), "buy catalog": "buy", "buy sell": "buy"} {
		require.Contains(t, spans, child, "%v", names(rec.Ended()))
		assert.Equal(t, spans[parent].SpanContext().SpanID(), spans[child].Parent().SpanID(), "%s is a child of %s", child, parent)
	}

	line := accessLine(t, b)
	assert.Equal(t, edge.TraceID().String(), line["trace_id"], "the access line names the trace")
	assert.Equal(t, "127.0.0.1", line["client"], "and the client's address")
	assert.NotContains(t, line, "code", "a 202 has no error code")
}

func TestAccessLineNamesTheErrorCode(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	b := tracedSetup(t, 1, rec)
	resp, _ := b.do(t, "POST", "/api/v1/vouchers/999999/orders", `{"quantity":1}`, "Authorization", "Bearer "+b.shopper)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	line := accessLine(t, b)
	assert.Equal(t, "not_found", line["code"])
	back, ok := tracing.ParseTraceparent(resp.Header.Get("traceparent"))
	require.True(t, ok, "a new trace without a traceparent from the edge")
	assert.Equal(t, back.TraceID().String(), line["trace_id"])
}

func TestTraceparentEchoedWithTracingOff(t *testing.T) {
	b := setup(t, func(_ *Config, d *testDeps) { d.Logger = slog.New(tracing.LogHandler(d.Logger.Handler())) })
	resp, _ := b.do(t, "GET", "/api/v1/vouchers", "", "traceparent", edgeParent)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, edgeParent, resp.Header.Get("traceparent"), "the edge's trace goes on past a gateway without tracing")
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", accessLine(t, b)["trace_id"])

	resp, _ = b.do(t, "GET", "/api/v1/vouchers", "", "traceparent", "00-zz-not-a-trace")
	require.Equal(t, http.StatusOK, resp.StatusCode, "a malformed traceparent is ignored, never refused")
	assert.Empty(t, resp.Header.Get("traceparent"))
}

// accessLine is the last access log line of b.
func accessLine(t testing.TB, b *bundle) map[string]any {
	t.Helper()
	var last map[string]any
	for _, l := range b.logs.JSONLines(t) {
		if l["msg"] == "http request" {
			last = l
		}
	}
	require.NotNil(t, last, "an access line: %s", b.logs.String())
	return last
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name()
	}
	return out
}

// discard is a span processor that drops what it is given: the cost
// measured is the spans', not an exporter's.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkBuyTraced is BenchmarkHandlerBuy with tracing off (no tracer:
// what a process without SECKILL_OTLP_ENDPOINT runs), off with an edge's
// traceparent, and on: every span recorded and none kept (ratio 0, the
// tail processor dropping each trace at its end), and every span recorded
// and kept (ratio 1, handed to a processor that drops it, so the export's
// own cost is left out).
func BenchmarkBuyTraced(b *testing.B) {
	quiet := func(_ *Config, d *testDeps) { d.Logger = slog.New(slog.DiscardHandler) }
	b.Run("off", func(b *testing.B) { handlerBuy(b, setup(b, quiet), "") })
	b.Run("off-edge-traceparent", func(b *testing.B) { handlerBuy(b, setup(b, quiet), edgeParent) })
	for _, ratio := range []float64{0, 1} {
		b.Run(fmt.Sprintf("on-ratio-%g", ratio), func(b *testing.B) {
			p := tracing.NewWithProcessor(ratio, 0, discard{})
			b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			handlerBuy(b, setup(b, quiet, func(_ *Config, d *testDeps) { d.Tracer = p.Tracer() }), "")
		})
	}
}
