package systemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRefusalsAreLabelledAndCounted reads the ops listener's /metrics after
// real requests: a path under /api/v1 that no route has, and an operator
// route asked without the operator token, are route="unmatched" (they used
// to carry the group's prefix, "/api/v1" and "/api/v1/admin"); and a buy
// refused before the gate chain (no sign-in, a bad id or quantity) counts
// in seckill_buy_outcomes_total by its code, as every other buy does, so
// that the outcomes add up to the buying route's requests.
func TestRefusalsAreLabelledAndCounted(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 10, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	shopper := ts.shopper(t, 9_300_001)

	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/api/v1/no-such-route", "", http.StatusNotFound},
		{http.MethodGet, "/api/v1/vouchers/1/no-such-route", shopper, http.StatusNotFound},
		{http.MethodGet, "/no-such-page", "", http.StatusNotFound},
		{http.MethodGet, "/api/v1/admin/vouchers/" + vid + "/stats", "", http.StatusUnauthorized},
		{http.MethodGet, "/api/v1/admin/no-such-route", shopper, http.StatusForbidden},
	} {
		a := ts.do(t, c.method, c.path, c.token, nil, nil)
		require.Equal(t, c.status, a.status, "%s %s: %s", c.method, c.path, a.raw)
	}

	require.Equal(t, "unauthenticated", ts.buy(t, vid, "", 1, "").errorCode())
	require.Equal(t, "unauthenticated", ts.buy(t, vid, "not-a-token", 1, "").errorCode())
	require.Equal(t, "invalid_input", ts.buy(t, vid, shopper, 0, "").errorCode())
	require.Equal(t, "invalid_input", ts.buy(t, "not-an-id", shopper, 1, "").errorCode())
	require.Equal(t, "invalid_input", ts.buy(t, vid, shopper, 1, "bad key with spaces").errorCode())
	a := ts.buy(t, vid, shopper, 1, "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	require.Equal(t, "limit_exceeded", ts.buy(t, vid, shopper, 1, "").errorCode())

	fams := ts.scrape(t)
	requests := family(t, fams, "seckill_http_requests_total")
	for _, m := range requests.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" {
				require.NotContains(t, []string{"/api/v1", "/api/v1/admin", "/api/v1/"}, l.GetValue(), "a group's prefix is no route: %v", m)
			}
		}
	}
	require.Equal(t, 3.0, counter(t, fams, "seckill_http_requests_total", "route", "unmatched", "method", "GET", "status", "404"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_http_requests_total", "route", "unmatched", "method", "GET", "status", "401"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_http_requests_total", "route", "unmatched", "method", "GET", "status", "403"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_http_requests_total", "route", "/api/v1/admin/vouchers", "method", "POST", "status", "201"),
		"an operator route that answered keeps its pattern")

	require.Equal(t, 2.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "unauthenticated"))
	require.Equal(t, 3.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "invalid_input"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "accepted"))
	require.Equal(t, 1.0, counter(t, fams, "seckill_buy_outcomes_total", "outcome", "limit_exceeded"), "counted once, by the chain")
	var outcomes, buys float64
	for _, m := range family(t, fams, "seckill_buy_outcomes_total").GetMetric() {
		outcomes += m.GetCounter().GetValue()
	}
	for _, m := range requests.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && l.GetValue() == buyRoute {
				buys += m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, 7.0, buys)
	require.Equal(t, buys, outcomes, "every buy request counts once in the outcomes")
}
