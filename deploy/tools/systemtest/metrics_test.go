package systemtest

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// buyRoute is the buying route's pattern, the route label of its series.
const buyRoute = "/api/v1/vouchers/:id/orders"

// TestMetricsCountWhatHappened makes a few buys over HTTP, waits for the
// workers, pays one order, and reads /metrics as Prometheus would: every
// key family is there, with exactly the values this test caused (the
// registry is the process's own, so nothing else counts in it).
func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 100, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))

	var orderIDs []string
	for u := int64(1); u <= 3; u++ {
		a := ts.buy(t, vid, ts.shopper(t, 9_100_000+u), 1, "")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
		orderIDs = append(orderIDs, a.body["order_id"].(string))
	}
	// The first shopper again: over the per-user limit of 1.
	first := ts.shopper(t, 9_100_001)
	a := ts.buy(t, vid, first, 1, "")
	require.Equal(t, http.StatusConflict, a.status, "%s", a.raw)
	require.Equal(t, "limit_exceeded", a.errorCode())
	ts.waitPersisted(t, vid, 3)

	pay := ts.do(t, http.MethodPost, "/api/v1/orders/"+orderIDs[0]+"/pay", first, nil, nil)
	require.Equal(t, http.StatusOK, pay.status, "%s", pay.raw)

	// A worker sets a partition's lag after committing the batch's offset,
	// a moment after the orders are confirmed (what waitPersisted saw).
	var fams map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		fams = ts.scrape(t)
		_, ok := fams["seckill_consumer_lag"]
		return ok
	}, 10*time.Second, 20*time.Millisecond, "no consumer lag reported")

	// Gateway.
	require.Equal(t, 3.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "accepted"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "limit_exceeded"))
	require.Equal(t, 0.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "sold_out"), "every outcome exists from the start")
	require.Equal(t, 3.0, counter(t, fams, "seckill_http_requests_total", "route", buyRoute, "method", "POST", "status", "202"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_http_requests_total", "route", buyRoute, "method", "POST", "status", "409"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_http_requests_total", "route", "/api/v1/orders/:id/pay", "method", "POST", "status", "200"))
	require.EqualValues(t, 4, histogram(t, fams, "seckill_http_request_duration_seconds", "route", buyRoute).GetSampleCount())

	// Redis: four reservations ran the script (the refusal too).
	require.EqualValues(t, 4, histogram(t, fams, "seckill_redis_script_duration_seconds", "script", "reserve").GetSampleCount())
	require.GreaterOrEqual(t, histogram(t, fams, "seckill_redis_script_duration_seconds", "script", "warm").GetSampleCount(), uint64(1))

	// Kafka: three messages written, none failed, three consumed in batches,
	// no lag left on the partitions that had them.
	require.EqualValues(t, 3, histogram(t, fams, "seckill_kafka_produce_duration_seconds").GetSampleCount())
	require.Equal(t, 0.0, counter(t, fams, "seckill_kafka_produce_errors_total"))
	// Each message is a user id and a reservation's JSON: tens of bytes.
	require.InDelta(t, 3*150, counter(t, fams, "seckill_kafka_produced_bytes_total"), 3*120)
	batches := histogram(t, fams, "seckill_consumer_batch_size")
	require.Equal(t, 3.0, batches.GetSampleSum(), "every message is in exactly one batch")
	lag := family(t, fams, "seckill_consumer_lag")
	require.NotEmpty(t, lag.GetMetric())
	for _, m := range lag.GetMetric() {
		require.Equal(t, "partition", m.GetLabel()[0].GetName())
		require.Equal(t, 0.0, m.GetGauge().GetValue(), "partition %s", m.GetLabel()[0].GetValue())
	}

	// Orders: one transaction per batch; three created, one of them paid.
	require.EqualValues(t, batches.GetSampleCount(), histogram(t, fams, "seckill_persist_duration_seconds").GetSampleCount())
	require.Equal(t, 3.0, counter(t, fams, "seckill_orders_total", "status", "created"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_orders_total", "status", "paid"))
	require.Equal(t, 0.0, counter(t, fams, "seckill_orders_total", "status", "failed"))
}

// TestPprofIsForOperators: the profiles answer the admin token only.
func TestPprofIsForOperators(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	const path = "/api/v1/admin/debug/pprof/heap?debug=1"
	require.Equal(t, http.StatusUnauthorized, ts.do(t, http.MethodGet, path, "", nil, nil).status)
	require.Equal(t, http.StatusForbidden, ts.do(t, http.MethodGet, path, ts.shopper(t, 9_200_001), nil, nil).status)
	a := ts.do(t, http.MethodGet, path, ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, a.status)
	require.Contains(t, string(a.raw), "heap profile")
}

// metricsText is the ops listener's /metrics as served.
func (ts *testSystem) metricsText(t *testing.T) []byte {
	t.Helper()
	resp, err := ts.client.Get(ts.ops + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return raw
}

// scrape reads /metrics in the text format, from the ops listener.
func (ts *testSystem) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(ts.metricsText(t)))
	require.NoError(t, err)
	return fams
}

func family(t *testing.T, fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "/metrics has no family %s", name)
	return f
}

// metric finds the series of family name whose labels include the given
// name/value pairs.
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	t.Helper()
	f := family(t, fams, name)
	var seen []string
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		var parts []string
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
		seen = append(seen, "{"+strings.Join(parts, ",")+"}")
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	t.Fatalf("%s has no series with %v; it has %v", name, labels, seen)
	return nil
}

func counter(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	return metric(t, fams, name, labels...).GetCounter().GetValue()
}

func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) *dto.Histogram {
	t.Helper()
	h := metric(t, fams, name, labels...).GetHistogram()
	require.NotNil(t, h, "%s is not a histogram", name)
	return h
}

// The sweeper and the reconciler say when they last passed, so an alert can
// tell a stopped loop from an idle one; a process without the sweeper role
// reads 0.
func TestLoopsReportTheirLastPass(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	begin := float64(time.Now().Add(-time.Second).Unix())
	for _, name := range []string{"seckill_sweeper_last_success_timestamp_seconds", "seckill_reconciler_last_success_timestamp_seconds"} {
		require.Eventually(t, func() bool {
			return metric(t, ts.scrape(t), name).GetGauge().GetValue() >= begin
		}, 30*time.Second, 100*time.Millisecond, name)
	}
	gw := ts.startPeer(t, gatewayOnly)
	require.Zero(t, metric(t, gw.scrape(t), "seckill_sweeper_last_success_timestamp_seconds").GetGauge().GetValue())
}
