package systemtest

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/stretchr/testify/require"
)

// TestHoardingCostsTheHoarder: holds the sweeper times out and holds the
// shopper cancels count against them; at SECKILL_HOARD_LIMIT within the
// window their next buy is 403 unpaid_limit, saying when they may buy again;
// paying an order clears nothing; `seckill hoard` shows the count and clears
// it, and the shopper buys again; three more holds let expire refuse them
// again.
func TestHoardingCostsTheHoarder(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{
		"SECKILL_PAY_TIMEOUT": "2s", "SECKILL_HOARD_LIMIT": "3", "SECKILL_HOARD_WINDOW": "1h",
	})
	vid := ts.createVoucher(t, 20, 10, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	userID := testUser()
	shopper := ts.shopper(t, userID)
	buy := func(key string) string {
		t.Helper()
		a := ts.buy(t, vid, shopper, 1, key)
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
		id := a.body["order_id"].(string)
		ts.waitStatus(t, shopper, id, "created")
		return id
	}
	refused := func() time.Time {
		t.Helper()
		a := ts.buy(t, vid, shopper, 1, "")
		require.Equal(t, http.StatusForbidden, a.status, "%s", a.raw)
		e := a.body["error"].(map[string]any)
		require.Equal(t, "unpaid_limit", e["code"])
		msg := e["message"].(string)
		_, at, ok := strings.Cut(msg, "you may buy again at ")
		require.True(t, ok, "the message says when: %q", msg)
		until, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err, "%q", msg)
		retryAt, err := time.Parse(time.RFC3339, e["retry_at"].(string))
		require.NoError(t, err, "unpaid_limit carries retry_at: %s", a.raw)
		require.True(t, retryAt.Equal(until), "retry_at %s is the moment the message gives, %s", retryAt, until)
		require.True(t, until.After(time.Now()) && !until.After(time.Now().Add(time.Hour)),
			"when the oldest counted strike leaves the hour's window: %s", until)
		return until
	}

	// Two holds time out (the sweeper), one is cancelled by the shopper.
	expired := []string{buy("h1"), buy("h2")}
	for _, id := range expired {
		ts.waitStatus(t, shopper, id, "cancelled")
	}
	cancelled, paid := buy("h3"), buy("p")
	c := ts.do(t, http.MethodPost, "/api/v1/orders/"+cancelled+"/cancel", shopper, nil, nil)
	require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
	refused()

	// Paying clears nothing.
	p := ts.do(t, http.MethodPost, "/api/v1/orders/"+paid+"/pay", shopper, nil, nil)
	require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
	refused()

	// The operator sees the count and clears it; the clear is in the
	// operators' trail, by the account that ran it.
	getenv := func(k string) string {
		return map[string]string{"SECKILL_REDIS_URL": ts.cfg.RedisURL, "SECKILL_DATABASE_URL": ts.cfg.DatabaseURL,
			"SECKILL_HOARD_LIMIT": "3", "SECKILL_HOARD_WINDOW": "1h", "USER": "hoardkeeper"}[k]
	}
	hoard := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		require.NoError(t, app.Run(context.Background(), append([]string{"hoard"}, args...), getenv, &out, &errOut), "%s", errOut.String())
		return out.String()
	}
	user := strconv.FormatInt(userID, 10)
	shown := hoard("show", user)
	require.Contains(t, shown, "user "+user+": 3 strikes within 1h0m0s (limit 3); new holds are refused (403 unpaid_limit) until ")
	for _, id := range append(expired, cancelled) {
		require.Contains(t, shown, "order "+id+" at ")
	}
	require.NotContains(t, shown, "order "+paid+" ")
	require.Equal(t, "user "+user+": cleared 3 strikes; new holds are allowed\n", hoard("clear", user))
	require.Contains(t, hoard("show", user), ": 0 strikes within")
	trail := ts.do(t, http.MethodGet, "/api/v1/admin/actions", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, trail.status, "%s", trail.raw)
	require.Contains(t, string(trail.raw), `"operator":"cli:hoardkeeper","action":"hoard.clear","target":"user:`+user+`"`)
	require.Contains(t, string(trail.raw), `"change":{"strikes_cleared":3}`)

	// Free again: three holds let expire refuse the fourth buy.
	again := []string{buy("a1"), buy("a2"), buy("a3")}
	for _, id := range again {
		ts.waitStatus(t, shopper, id, "cancelled")
	}
	refused()
	require.EqualValues(t, 1, ts.checkInvariants(t, vid, 10), "one unit sold (paid), the rest back on sale")
}
