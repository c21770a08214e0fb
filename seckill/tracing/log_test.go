package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func TestLogLinesCarryTheTraceAndReadableDurations(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: ReadableDurations}))).With("part", "test")
	sc, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced", "took", 1234567*time.Nanosecond)
	log.InfoContext(context.Background(), "untraced", "took", 15*time.Second)

	var lines []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", lines[0]["trace_id"])
	assert.Equal(t, "00f067aa0ba902b7", lines[0]["span_id"])
	assert.Equal(t, "1.235ms", lines[0]["took"], "a duration reads as one, not as nanoseconds")
	assert.Equal(t, "test", lines[0]["part"], "attributes of With stay")
	assert.NotContains(t, lines[1], "trace_id", "no trace, no id")
	assert.Equal(t, "15s", lines[1]["took"])
}
