// Package tracing is the process's OpenTelemetry setup: the tracer provider
// exported over OTLP/HTTP, the sampling that keeps errors and slow buys
// whatever the ratio (tail.go), the trace ids in log lines (log.go), the
// spans of Redis script calls (redis.go) and of PostgreSQL (pgx.go), and
// the per-order trace contexts a worker's batch carries (orders.go).
//
// With no endpoint configured the provider is OpenTelemetry's no-op one and
// Enabled reports false: the callers then install no wrapper at all, so a
// process without tracing pays nothing per buy (the gateway's
// BenchmarkBuyTraced measures both).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Scope is the instrumentation scope of every tracer the project makes.
const Scope = "github.com/flashsale/seckill"

// Config says where spans go and which are kept.
type Config struct {
	// Endpoint is the OTLP/HTTP collector, as host:port or a URL
	// (http://host:4318). Empty: tracing is off.
	Endpoint string
	// SampleRatio is the share of new traces kept (0 to 1); a caller's
	// sampled traceparent is always kept.
	SampleRatio float64
	// Slow keeps a trace whose local root span took at least this long,
	// whatever the ratio (0: none kept for being slow).
	Slow time.Duration
	// Service is service.name.
	Service string
}

// Provider is the process's tracer provider.
type Provider struct {
	tp      trace.TracerProvider
	sdk     *sdktrace.TracerProvider
	enabled bool
}

// Off is a Provider that records nothing.
func Off() *Provider { return &Provider{tp: noop.NewTracerProvider()} }

// New builds the provider of cfg: Off when cfg.Endpoint is empty.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Endpoint == "" {
		return Off(), nil
	}
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, fmt.Errorf("tracing: sample ratio %v is not between 0 and 1", cfg.SampleRatio)
	}
	exp, err := otlptracehttp.New(ctx, endpointOption(cfg.Endpoint)...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(cfg.Service))
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(recordThenDecide(cfg.SampleRatio)),
		sdktrace.WithSpanProcessor(newTailProcessor(sdktrace.NewBatchSpanProcessor(exp), cfg.Slow, maxPendingTraces)),
	)
	return &Provider{tp: sdk, sdk: sdk, enabled: true}, nil
}

// NewWithProcessor builds an enabled provider whose spans go to next
// through the same sampling as New's: for benchmarks and tests that need no
// collector.
func NewWithProcessor(sampleRatio float64, slow time.Duration, next sdktrace.SpanProcessor) *Provider {
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(recordThenDecide(sampleRatio)),
		sdktrace.WithSpanProcessor(newTailProcessor(next, slow, maxPendingTraces)),
	)
	return &Provider{tp: sdk, sdk: sdk, enabled: true}
}

// endpointOption reads SECKILL_OTLP_ENDPOINT: a URL keeps its scheme, and
// its path, or gets OTLP's /v1/traces when it has none (the form of
// OTEL_EXPORTER_OTLP_ENDPOINT); host:port is plain HTTP.
func endpointOption(ep string) []otlptracehttp.Option {
	if u, err := url.Parse(ep); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpoint(ep), otlptracehttp.WithInsecure()}
}

// Enabled reports whether spans are recorded; when false, callers install
// no wrappers.
func (p *Provider) Enabled() bool { return p != nil && p.enabled }

// Tracer is the project's tracer (no-op when off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return noop.NewTracerProvider().Tracer(Scope)
	}
	return p.tp.Tracer(Scope)
}

// Shutdown exports what is buffered and stops; safe when off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// ForceFlush exports every span ended so far.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	if err := p.sdk.ForceFlush(ctx); err != nil {
		return fmt.Errorf("tracing: flush: %w", err)
	}
	return nil
}
