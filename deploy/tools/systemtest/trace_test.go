package systemtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/tracing"
)

// jaegerSpan is a span as Jaeger's HTTP API answers it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"` // µs
	Duration  int64 `json:"duration"`  // µs
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

// parent is the span's CHILD_OF reference in its own trace ("" for a root).
func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// tag is the value of the span's tag key, as text.
func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// TestTraceOfOneBuy makes one buy with a traceparent, as a proxy in front of
// the gateway would send it, and finds its whole path in the package's
// Jaeger: the gateway's request and each step of the buy, the reservation
// script in Redis, the Kafka publish, the worker's processing of that
// message (from the traceparent in the message's headers, on a real
// three-node Apache Kafka), the push of "created" to the shopper's socket,
// and the worker's batch transaction in a trace of its own, linked to the
// order's. It prints the span tree.
func TestTraceOfOneBuy(t *testing.T) {
	t.Parallel()
	j := stack.Jaeger(t)
	ts := startSystem(t, map[string]string{
		"SECKILL_OTLP_ENDPOINT":      j.OTLPEndpoint,
		"SECKILL_TRACE_SAMPLE_RATIO": "1",
	})
	vid := ts.createVoucher(t, 10, 2, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	user := testUser()
	tok := ts.shopper(t, user)
	ws := ts.openWS(t, tok)
	require.Empty(t, ws.untilPong(t))

	var tid [16]byte
	_, _ = rand.Read(tid[:])
	traceID := hex.EncodeToString(tid[:])
	edge := "00-" + traceID + "-00f067aa0ba902b7-01"
	a := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/orders", tok, map[string]any{"quantity": 1},
		map[string]string{"Idempotency-Key": "trace-1", "traceparent": edge})
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	back, ok := tracing.ParseTraceparent(a.header.Get("traceparent"))
	require.True(t, ok, "the answer carries the request's traceparent")
	require.Equal(t, traceID, back.TraceID().String(), "in the edge's trace")
	orderID := a.body["order_id"].(string)
	ws.waitOrder(t, user, orderID, "created")

	// The spans arrive as each process's exporter sends its batch (every
	// few seconds): wait for the last of the path, the push.
	var spans []jaegerSpan
	require.Eventually(t, func() bool {
		spans = jaegerTrace(t, j.QueryURL, traceID)
		return slices.ContainsFunc(spans, func(s jaegerSpan) bool { return s.OperationName == "notify push" })
	}, 60*time.Second, 250*time.Millisecond, "the push's span never reached Jaeger")
	t.Logf("trace %s in Jaeger:\n%s", traceID, spanTree(spans))

	byName := map[string]jaegerSpan{}
	byID := map[string]jaegerSpan{}
	for _, s := range spans {
		byName[s.OperationName] = s
		byID[s.SpanID] = s
	}
	topic := ts.cfg.KafkaTopic
	path := []string{"POST /api/v1/vouchers/:id/orders", "buy", "buy breaker", "buy sell", topic + " publish", topic + " process", "notify push"}
	for i, name := range path {
		s, ok := byName[name]
		require.True(t, ok, "span %q in the trace", name)
		if i == 0 {
			assert.Equal(t, "00f067aa0ba902b7", s.parent(), "the request is a child of the edge's span")
			continue
		}
		assert.Equal(t, byName[path[i-1]].SpanID, s.parent(), "%s is a child of %s", name, path[i-1])
		assert.GreaterOrEqual(t, s.StartTime, byName[path[i-1]].StartTime, "%s starts after %s", name, path[i-1])
	}
	for _, name := range []string{"buy catalog", "buy user_limit", "buy global_limit"} {
		require.Contains(t, byName, name)
		assert.Equal(t, byName["buy"].SpanID, byName[name].parent(), "%s is a step of the buy", name)
	}
	script := slices.IndexFunc(spans, func(s jaegerSpan) bool {
		return strings.HasPrefix(s.OperationName, "redis eval") && s.parent() == byName["buy sell"].SpanID
	})
	require.GreaterOrEqual(t, script, 0, "the reservation script's call is a child of the sale")
	assert.Equal(t, orderID, byName["notify push"].tag("seckill.order_id"))
	assert.Equal(t, "created", byName["notify push"].tag("seckill.status"))

	// The worker's batch: a trace of its own, linked to this order's
	// processing, with its PostgreSQL statements inside.
	process := byName[topic+" process"]
	var batch []jaegerSpan
	require.Eventually(t, func() bool {
		for _, tr := range jaegerSearch(t, j.QueryURL, "orders batch") {
			for _, s := range tr {
				if s.OperationName == "orders batch" && slices.ContainsFunc(s.References, func(r struct {
					RefType string `json:"refType"`
					TraceID string `json:"traceID"`
					SpanID  string `json:"spanID"`
				}) bool {
					return r.TraceID == traceID && r.SpanID == process.SpanID
				}) {
					batch = tr
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 250*time.Millisecond, "no batch span linked to the order's processing")
	t.Logf("the worker's batch, linked to it:\n%s", spanTree(batch))
	assert.True(t, slices.ContainsFunc(batch, func(s jaegerSpan) bool { return strings.HasPrefix(s.OperationName, "postgresql") }),
		"the batch's transaction has its statements")
}

// jaegerTrace is the trace's spans, none while Jaeger has none of them.
func jaegerTrace(t *testing.T, query, traceID string) []jaegerSpan {
	t.Helper()
	var out struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if !jaegerGet(t, query+"/api/traces/"+traceID, &out) || len(out.Data) == 0 {
		return nil
	}
	return out.Data[0].Spans
}

// jaegerSearch is the recent traces of the seckill service that have a
// span of operation.
func jaegerSearch(t *testing.T, query, operation string) [][]jaegerSpan {
	t.Helper()
	var out struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	u := query + "/api/traces?service=seckill&limit=100&lookback=1h&operation=" + strings.ReplaceAll(operation, " ", "%20")
	if !jaegerGet(t, u, &out) {
		return nil
	}
	traces := make([][]jaegerSpan, len(out.Data))
	for i, d := range out.Data {
		traces[i] = d.Spans
	}
	return traces
}

// jaegerGet decodes the JSON at u into v; false on a 404 (not there yet).
func jaegerGet(t *testing.T, u string, v any) bool {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false
	}
	require.Equal(t, http.StatusOK, resp.StatusCode, u)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return true
}

// spanTree draws spans as a tree, children by start time, each with its
// start relative to the trace's first span and its duration.
func spanTree(spans []jaegerSpan) string {
	if len(spans) == 0 {
		return "(no spans)\n"
	}
	ids := map[string]bool{}
	first := spans[0].StartTime
	for _, s := range spans {
		ids[s.SpanID] = true
		first = min(first, s.StartTime)
	}
	kids := map[string][]jaegerSpan{}
	for _, s := range spans {
		p := s.parent()
		if !ids[p] {
			p = "" // a root here (its parent is in another process's or the edge's hands)
		}
		kids[p] = append(kids[p], s)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		list := kids[parent]
		slices.SortFunc(list, func(x, y jaegerSpan) int { return int(x.StartTime - y.StartTime) })
		for _, s := range list {
			extra := ""
			for _, r := range s.References {
				if r.RefType == "FOLLOWS_FROM" || r.TraceID != s.TraceID {
					extra += " link->" + r.TraceID[:8] + "/" + r.SpanID[:8]
				}
			}
			fmt.Fprintf(&b, "%s%-*s +%8.3fms %8.3fms%s\n", strings.Repeat("  ", depth), 44-2*depth, s.OperationName,
				float64(s.StartTime-first)/1000, float64(s.Duration)/1000, extra)
			walk(s.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

// TestDevModeTracesToJaeger is `make run SECKILL_DEV_TRACING=jaeger` with
// JSON logs: dev mode starts its private Jaeger, a buy's trace is in it,
// the buy's access line names its trace, client and (for a refusal) error
// code, durations read as durations, and the last line, once everything
// stopped, is "stopped" with the uptime.
func TestDevModeTracesToJaeger(t *testing.T) {
	// This test is serial (main_test.go): `seckill dev` sets sarama's and go-redis's package loggers, which every system of this process reads.
	d := startDev(t, map[string]string{"SECKILL_DEV_TRACING": "jaeger", "SECKILL_LOG_LEVEL": "info", "SECKILL_LOG_FORMAT": "json"})
	var ui string
	for _, l := range d.stderr.JSONLines(t) {
		if u, ok := l["ui"].(string); ok && strings.HasPrefix(l["msg"].(string), "dev tracing") {
			ui = u
		}
	}
	require.NotEmpty(t, ui, "dev mode logs where its Jaeger is: %s", d.stderr)

	vs := d.ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil)
	require.NotEmpty(t, vs.list)
	a := d.ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vs.list[0]["id"].(string)+"/orders", "not-a-token", map[string]any{"quantity": 1}, nil)
	require.Equal(t, http.StatusUnauthorized, a.status, "%s", a.raw)
	back, ok := tracing.ParseTraceparent(a.header.Get("traceparent"))
	require.True(t, ok, "every answer names its trace when the server traces")
	require.Eventually(t, func() bool { return len(jaegerTrace(t, ui, back.TraceID().String())) > 0 },
		30*time.Second, 250*time.Millisecond, "the request's trace reached dev mode's Jaeger")

	d.stop(t)
	lines := d.stderr.JSONLines(t)
	var access map[string]any
	for _, l := range lines {
		if l["msg"] == "http request" && l["trace_id"] == back.TraceID().String() {
			access = l
		}
	}
	require.NotNil(t, access, "the access line of the buy carries its trace id")
	assert.Equal(t, "unauthenticated", access["code"])
	assert.Equal(t, "127.0.0.1", access["client"])
	assert.Regexp(t, `^[0-9.]+(ns|µs|ms|s)$`, access["duration"], "a duration reads as one")
	last := lines[len(lines)-1]
	assert.Equal(t, "stopped", last["msg"], "the last line says the process stopped")
	assert.Regexp(t, `^[0-9.hms]+$`, last["uptime"])
}
