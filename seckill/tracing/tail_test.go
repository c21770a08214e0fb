package tracing

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// local makes a trace of a root and one child, the child failed when fail.
func local(ctx context.Context, tr trace.Tracer, fail bool, took time.Duration) trace.SpanContext {
	ctx, root := tr.Start(ctx, "root")
	_, child := tr.Start(ctx, "child")
	if fail {
		child.SetStatus(codes.Error, "boom")
	}
	child.End()
	time.Sleep(took)
	root.End()
	return root.SpanContext()
}

func exported(rec *tracetest.SpanRecorder, sc trace.SpanContext) []string {
	var names []string
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == sc.TraceID() {
			names = append(names, s.Name())
		}
	}
	return names
}

func TestRecordThenDecideKeepsFailedAndSlowTraces(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p := NewWithProcessor(0, 50*time.Millisecond, rec)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	tr := p.Tracer()

	quiet := local(context.Background(), tr, false, 0)
	assert.False(t, quiet.IsSampled(), "ratio 0 samples no new trace")
	assert.Empty(t, exported(rec, quiet), "a quick trace that failed nowhere is dropped whole")

	failed := local(context.Background(), tr, true, 0)
	assert.ElementsMatch(t, []string{"root", "child"}, exported(rec, failed), "a failed child keeps its whole local trace")

	slow := local(context.Background(), tr, false, 60*time.Millisecond)
	assert.ElementsMatch(t, []string{"root", "child"}, exported(rec, slow), "a slow root keeps its trace")

}

func TestSampledParentIsFollowedWhateverTheRatio(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p := NewWithProcessor(0, 0, rec)
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	parent, ok := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	require.True(t, ok)
	sc := local(trace.ContextWithRemoteSpanContext(context.Background(), parent), p.Tracer(), false, 0)
	assert.True(t, sc.IsSampled())
	assert.Equal(t, parent.TraceID(), sc.TraceID())
	assert.ElementsMatch(t, []string{"root", "child"}, exported(rec, sc))

	// A batch linked to a sampled order is sampled too.
	_, batch := p.Tracer().Start(context.Background(), "batch", trace.WithLinks(trace.Link{SpanContext: parent}))
	batch.End()
	assert.True(t, batch.SpanContext().IsSampled())
}

func TestPendingTracesAreBounded(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := newTailProcessor(rec, 0, 2)
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(recordThenDecide(0)), sdktrace.WithSpanProcessor(tp))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	tr := sdk.Tracer("t")
	var roots []trace.Span
	for range 5 {
		ctx, root := tr.Start(context.Background(), "root")
		_, child := tr.Start(ctx, "child")
		child.End()
		roots = append(roots, root)
	}
	tp.mu.Lock()
	assert.Len(t, tp.pending, 2, "no more undecided traces held than the bound")
	tp.mu.Unlock()
	for _, r := range roots {
		r.End()
	}
	tp.mu.Lock()
	assert.Empty(t, tp.pending, "every decided trace is forgotten")
	tp.mu.Unlock()
}

func TestTraceparentRoundTrip(t *testing.T) {
	const v = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sc, ok := ParseTraceparent(v)
	require.True(t, ok)
	assert.True(t, sc.IsRemote())
	assert.Equal(t, v, Traceparent(sc))
	unsampled, ok := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	require.True(t, ok)
	assert.False(t, unsampled.IsSampled())
	for _, bad := range []string{"", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"} {
		_, ok := ParseTraceparent(bad)
		assert.False(t, ok, "%q", bad)
	}
	assert.Empty(t, Traceparent(trace.SpanContext{}))
}

func TestOrderSpans(t *testing.T) {
	sc, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx := WithOrders(context.Background(), map[int64]trace.SpanContext{7: sc})
	got, ok := OrderSpan(ctx, 7)
	assert.True(t, ok)
	assert.Equal(t, sc, got)
	_, ok = OrderSpan(ctx, 8)
	assert.False(t, ok)
	_, ok = OrderSpan(context.Background(), 7)
	assert.False(t, ok)
	assert.Equal(t, context.Background(), WithOrders(context.Background(), nil), "no map for no orders")
}
