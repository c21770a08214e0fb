package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Record then decide. The sampler records every span, and marks sampled
// only what the ratio (or a sampled parent, or a sampled link) picks; the
// tail processor exports the sampled spans at once and holds the others of
// each trace until the trace's local root span ends (the span whose parent
// is in another process, or none: the HTTP request, a Kafka message, a
// worker's batch). Then the whole local trace is exported when any of its
// spans failed or the root took SECKILL_TRACE_SLOW or longer, and dropped
// otherwise. So a ratio of 0.01 still shows every failed and every slow
// buy, each process deciding for its own part of the trace (a gateway's
// trace of a failed buy is kept; the worker keeps its part when the worker
// failed or was slow too).
//
// The price is that every buy records its spans even when few are kept
// (BenchmarkBuyTraced measures it); SECKILL_OTLP_ENDPOINT unset records
// nothing at all.

// maxPendingTraces bounds the traces held while undecided: past it, a new
// trace's unsampled spans are dropped at once (a burst of undecided buys
// costs bounded memory, never the process).
const maxPendingTraces = 4096

// maxPendingSpans bounds the spans held for one undecided trace.
const maxPendingSpans = 256

// ratioSampler samples new traces by ratio, follows a parent's decision,
// and records what it does not sample (recordThenDecide).
type ratioSampler struct {
	ratio sdktrace.Sampler
	desc  string
}

// recordThenDecide is the sampler of the provider: see the comment above.
func recordThenDecide(ratio float64) sdktrace.Sampler {
	return ratioSampler{ratio: sdktrace.TraceIDRatioBased(ratio), desc: "RecordThenDecide{" + sdktrace.TraceIDRatioBased(ratio).Description() + "}"}
}

// ShouldSample implements sdktrace.Sampler.
func (s ratioSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	psc := trace.SpanContextFromContext(p.ParentContext)
	res := sdktrace.SamplingResult{Decision: sdktrace.RecordOnly, Tracestate: psc.TraceState()}
	switch {
	case psc.IsValid():
		if psc.IsSampled() {
			res.Decision = sdktrace.RecordAndSample
		}
	case anySampled(p.Links):
		// A worker's batch of orders of which one is sampled.
		res.Decision = sdktrace.RecordAndSample
	default:
		if s.ratio.ShouldSample(p).Decision == sdktrace.RecordAndSample {
			res.Decision = sdktrace.RecordAndSample
		}
	}
	return res
}

// Description implements sdktrace.Sampler.
func (s ratioSampler) Description() string { return s.desc }

func anySampled(links []trace.Link) bool {
	for _, l := range links {
		if l.SpanContext.IsSampled() {
			return true
		}
	}
	return false
}

// tailProcessor holds the unsampled spans of each trace until its local
// root decides (see above), and hands what is kept to next.
type tailProcessor struct {
	next sdktrace.SpanProcessor
	slow time.Duration
	max  int

	mu      sync.Mutex
	pending map[trace.TraceID]*pendingTrace
}

// pendingTrace is one undecided trace's ended spans.
type pendingTrace struct {
	spans  []sdktrace.ReadOnlySpan
	failed bool
}

func newTailProcessor(next sdktrace.SpanProcessor, slow time.Duration, max int) *tailProcessor {
	return &tailProcessor{next: next, slow: slow, max: max, pending: make(map[trace.TraceID]*pendingTrace)}
}

// OnStart implements sdktrace.SpanProcessor.
func (t *tailProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	t.next.OnStart(ctx, s)
}

// OnEnd implements sdktrace.SpanProcessor.
func (t *tailProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	if sc.IsSampled() {
		t.next.OnEnd(s)
		return
	}
	failed := s.Status().Code == codes.Error
	parent := s.Parent()
	if !parent.IsValid() || parent.IsRemote() {
		t.decide(s, failed)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pending[sc.TraceID()]
	if p == nil {
		if len(t.pending) >= t.max {
			return
		}
		p = &pendingTrace{}
		t.pending[sc.TraceID()] = p
	}
	p.failed = p.failed || failed
	if len(p.spans) < maxPendingSpans {
		p.spans = append(p.spans, s)
	}
}

// decide ends the local trace of root: exported when failed or slow.
func (t *tailProcessor) decide(root sdktrace.ReadOnlySpan, failed bool) {
	t.mu.Lock()
	p := t.pending[root.SpanContext().TraceID()]
	delete(t.pending, root.SpanContext().TraceID())
	t.mu.Unlock()
	if p != nil {
		failed = failed || p.failed
	}
	slow := t.slow > 0 && root.EndTime().Sub(root.StartTime()) >= t.slow
	if !failed && !slow {
		return
	}
	if p != nil {
		for _, s := range p.spans {
			t.next.OnEnd(s)
		}
	}
	t.next.OnEnd(root)
}

// Shutdown implements sdktrace.SpanProcessor.
func (t *tailProcessor) Shutdown(ctx context.Context) error { return t.next.Shutdown(ctx) }

// ForceFlush implements sdktrace.SpanProcessor.
func (t *tailProcessor) ForceFlush(ctx context.Context) error { return t.next.ForceFlush(ctx) }
