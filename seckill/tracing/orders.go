package tracing

import (
	"context"
	"encoding/hex"

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
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	var b [55]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b[:])
}

// ParseTraceparent reads a W3C traceparent value into a remote span
// context; ok is false for anything malformed, which callers treat as no
// parent at all. It allocates nothing: the gateway reads one on every
// request that carries it, tracing on or off.
func ParseTraceparent(v string) (trace.SpanContext, bool) {
	// version "00", then trace id, span id and flags; a later version may
	// append fields after a '-', and "ff" is invalid.
	if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || !isHex(v[:2]) || v[:2] == "ff" ||
		(v[:2] == "00" && len(v) != 55) || (len(v) > 55 && v[55] != '-') || !isHex(v[53:55]) {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(v[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(v[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	flags := trace.TraceFlags(unhex(v[54])) & trace.FlagsSampled
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	return sc, sc.IsValid()
}

// isHex reports whether s is lowercase hex digits, as the header's are.
func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// unhex is one lowercase hex digit's value.
func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// traceparent is the W3C header's name.
const traceparent = "traceparent"

// HeaderTraceparent is the header that carries a trace in and out of the
// gateway, and inside Kafka messages.
const HeaderTraceparent = traceparent
