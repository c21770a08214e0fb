package systemtest

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetricsAreOnTheOpsListener: the shoppers' port answers GET /metrics
// with the API's 404, with or without the admin token, so a shopper can
// neither read the business figures nor make the process render them; the
// ops listener (SECKILL_OPS_ADDR) serves them, and its probes, to anyone
// who can reach it, as Prometheus scrapes.
func TestMetricsAreOnTheOpsListener(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	require.NotEqual(t, ts.base, ts.ops, "a gateway has an ops listener of its own")

	for _, token := range []string{"", ts.cfg.AdminToken} {
		a := ts.do(t, http.MethodGet, "/metrics", token, nil, nil)
		require.Equal(t, http.StatusNotFound, a.status, "the shoppers' port (token %q): %s", token, a.raw)
		require.Equal(t, "not_found", a.errorCode())
		require.NotContains(t, string(a.raw), "seckill_")
	}

	get := func(path string) (int, string) {
		resp, err := ts.client.Get(ts.ops + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	status, body := get("/metrics")
	require.Equal(t, http.StatusOK, status)
	t.Logf("GET /metrics on the ops listener: %d bytes", len(body))
	require.Contains(t, body, "\nseckill_http_requests_total{", "the gateway's own series")
	require.Contains(t, body, "\ngo_goroutines ", "and the process's")
	for _, probe := range []string{"/healthz", "/readyz"} {
		status, _ := get(probe)
		require.Equal(t, http.StatusOK, status, probe)
	}
	status, _ = get("/api/v1/vouchers")
	require.Equal(t, http.StatusNotFound, status, "the ops listener serves no shopper route")
}
