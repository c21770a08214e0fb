package gateway

import (
	"context"
	"strings"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill/tracing"
)

// errorCodeKey keys the API error code of an answer (errors.go), for the
// access line and the request's span.
type errorCodeKey struct{}

// startRequest joins the request to its trace: the caller's traceparent is
// its parent, and the answer carries the request's own traceparent, so the
// one who reports a problem can hand over the id of its trace. With the
// gateway's tracing off (no Deps.Tracer) a caller's traceparent is still
// kept as the request's context, so the log lines of the request carry the
// caller's trace id, and is echoed; a request without one costs nothing.
func (s *Server) startRequest(ctx context.Context, c *fiber.Ctx) (context.Context, trace.Span) {
	var parent trace.SpanContext
	if h := c.Get(tracing.HeaderTraceparent); h != "" {
		parent, _ = tracing.ParseTraceparent(h)
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	if s.deps.Tracer == nil {
		if parent.IsValid() {
			c.Set(tracing.HeaderTraceparent, tracing.Traceparent(parent))
		}
		return ctx, nil
	}
	ctx, span := s.deps.Tracer.Start(ctx, c.Method(), trace.WithSpanKind(trace.SpanKindServer))
	c.Set(tracing.HeaderTraceparent, tracing.Traceparent(span.SpanContext()))
	return ctx, span
}

// endRequest names the span by its route and ends it: an answer of 500 or
// 503 marks it failed, so the sampling keeps it (seckill/tracing).
func endRequest(span trace.Span, c *fiber.Ctx, route, client, code string, status int) {
	if span == nil {
		return
	}
	span.SetName(c.Method() + " " + route)
	span.SetAttributes(
		attribute.String("http.request.method", strings.Clone(c.Method())),
		attribute.String("http.route", route),
		attribute.Int("http.response.status_code", status),
		attribute.String("client.address", client),
	)
	if code != "" {
		span.SetAttributes(attribute.String("error.type", code))
	}
	if status >= fiber.StatusInternalServerError {
		span.SetStatus(codes.Error, code)
	}
	span.End()
}
