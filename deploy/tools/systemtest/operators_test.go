package systemtest

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
)

// operatorsCLI runs `seckill operators ARGS` on ts's database as the
// account user, and returns what it printed.
func (ts *testSystem) operatorsCLI(t *testing.T, user string, args ...string) string {
	t.Helper()
	env := map[string]string{"SECKILL_DATABASE_URL": ts.cfg.DatabaseURL, "USER": user}
	var out, errOut bytes.Buffer
	require.NoError(t, app.Run(t.Context(), append([]string{"operators"}, args...), func(k string) string { return env[k] }, &out, &errOut),
		"%s", errOut.String())
	return out.String()
}

// TestAdminTrailNamesOperators: operators have tokens of their own, made
// and revoked with `seckill operators`; a read token sees but changes
// nothing (403); every change (a voucher made, paused, resumed and
// steered, the breaker switched, a shopper's strikes cleared, operators
// added and revoked) is in one trail with who made it, the request and
// the change, SECKILL_ADMIN_TOKEN's as root's. Before, every change was
// "sha256:" of the one shared token, and most were in no trail at all.
func TestAdminTrailNamesOperators(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	alice := strings.TrimSpace(ts.operatorsCLI(t, "ops-lead", "add", "alice", "--scope", "write"))
	bob := strings.TrimSpace(ts.operatorsCLI(t, "ops-lead", "add", "--scope", "read", "bob"))
	require.NotEqual(t, alice, bob)
	listed := ts.operatorsCLI(t, "ops-lead", "list")
	require.Regexp(t, `(?m)^alice +write `, listed)
	require.Regexp(t, `(?m)^bob +read `, listed)
	require.NotContains(t, listed, alice, "a token is printed once, when made")

	// Alice changes; the request id she sends names the change in the trail.
	rid := map[string]string{"X-Request-Id": "alice-creates"}
	c := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", alice, map[string]any{
		"title": "alice's", "kind": "seckill", "price_cents": 100, "stock": 5, "per_user_limit": 1,
		"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}, rid)
	require.Equal(t, http.StatusCreated, c.status, "%s", c.raw)
	vid := c.body["id"].(string)
	path := "/api/v1/admin/vouchers/" + vid
	for _, st := range []string{"paused", "on_sale"} {
		r := ts.do(t, http.MethodPut, path+"/state", alice, map[string]any{"state": st}, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	r := ts.do(t, http.MethodPatch, path, alice, map[string]any{"add_stock": 2}, map[string]string{"Idempotency-Key": "alice-2"})
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	r = ts.do(t, http.MethodPut, "/api/v1/admin/breaker", alice, map[string]any{"mode": "auto"}, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)

	// Bob reads, and is refused every change.
	for _, p := range []string{path + "/stats", path + "/changes", path + "/report", "/api/v1/admin/breaker", "/api/v1/admin/actions"} {
		r := ts.do(t, http.MethodGet, p, bob, nil, nil)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", p, r.raw)
	}
	for _, ch := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPatch, path, map[string]any{"add_stock": 1}},
		{http.MethodPut, path + "/state", map[string]any{"state": "paused"}},
		{http.MethodPut, "/api/v1/admin/breaker", map[string]any{"mode": "open"}},
		{http.MethodPost, "/api/v1/admin/vouchers", map[string]any{"title": "bob's"}},
	} {
		r := ts.do(t, ch.method, ch.path, bob, ch.body, nil)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", ch.method, ch.path, r.raw)
		require.Equal(t, "forbidden", r.errorCode())
		require.Contains(t, string(r.raw), "write token")
	}
	require.EqualValues(t, 7, ts.stockTotal(t, vid), "bob changed nothing")

	// Root is root; a shopper's strikes cleared from the command line are
	// the account's that ran it.
	r = ts.do(t, http.MethodPatch, path, ts.cfg.AdminToken, map[string]any{"add_stock": 1}, nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	env := map[string]string{"SECKILL_REDIS_URL": ts.cfg.RedisURL, "SECKILL_DATABASE_URL": ts.cfg.DatabaseURL, "USER": "support-1"}
	var out, errOut bytes.Buffer
	require.NoError(t, app.Run(t.Context(), []string{"hoard", "clear", "424242"}, func(k string) string { return env[k] }, &out, &errOut), "%s", errOut.String())

	// Revoked, alice's token is refused on every gateway within a second.
	require.Contains(t, ts.operatorsCLI(t, "ops-lead", "revoke", "alice"), "revoked")
	require.Eventually(t, func() bool {
		return ts.do(t, http.MethodGet, path+"/stats", alice, nil, nil).status == http.StatusUnauthorized
	}, 5*time.Second, 100*time.Millisecond, "a revoked token stops working")
	r = ts.do(t, http.MethodPatch, path, alice, map[string]any{"add_stock": 1}, nil)
	require.Equal(t, http.StatusUnauthorized, r.status, "%s", r.raw)
	require.Contains(t, ts.operatorsCLI(t, "ops-lead", "list", "--all"), "alice")

	// The trail, read three entries a page.
	var trail []map[string]any
	for after := "0"; ; {
		page := ts.do(t, http.MethodGet, "/api/v1/admin/actions?limit=3&after="+after, bob, nil, nil)
		require.Equal(t, http.StatusOK, page.status, "%s", page.raw)
		got := page.body["actions"].([]any)
		require.LessOrEqual(t, len(got), 3)
		if len(got) == 0 {
			require.Equal(t, after, page.body["next_after"])
			break
		}
		for _, e := range got {
			trail = append(trail, e.(map[string]any))
		}
		after = page.body["next_after"].(string)
	}
	for _, q := range []string{"after=", "after=x", "after=01", "limit=", "limit=0", "limit=1001", "limit=1.5"} {
		r := ts.do(t, http.MethodGet, "/api/v1/admin/actions?"+q, bob, nil, nil)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", q, r.raw)
	}
	var lines []string
	for _, e := range trail {
		lines = append(lines, fmt.Sprintf("%s %s %s", e["operator"], e["action"], e["target"]))
	}
	require.Equal(t, []string{
		"cli:ops-lead operator.add operator:alice",
		"cli:ops-lead operator.add operator:bob",
		"alice voucher.create voucher:" + vid,
		"alice voucher.pause voucher:" + vid,
		"alice voucher.resume voucher:" + vid,
		"alice voucher.change voucher:" + vid,
		"alice breaker.switch breaker",
		"root voucher.change voucher:" + vid,
		"cli:support-1 hoard.clear user:424242",
		"cli:ops-lead operator.revoke operator:alice",
	}, lines, "every change, in order, nothing refused")
	require.Equal(t, "alice-creates", trail[2]["request_id"])
	require.Equal(t, "alice's", trail[2]["change"].(map[string]any)["title"])
	require.Equal(t, "alice-2", trail[5]["idempotency_key"])
	require.Equal(t, map[string]any{"add_stock": float64(2)}, trail[5]["change"])
	require.Equal(t, map[string]any{"mode": "auto"}, trail[6]["change"])
	require.Equal(t, map[string]any{"name": "bob", "scope": "read"}, trail[1]["change"])
	for i := 1; i < len(trail); i++ {
		prev, err := time.Parse(time.RFC3339Nano, trail[i-1]["at"].(string))
		require.NoError(t, err)
		at, err := time.Parse(time.RFC3339Nano, trail[i]["at"].(string))
		require.NoError(t, err)
		require.False(t, at.Before(prev), "oldest first")
	}
	changes := ts.do(t, http.MethodGet, path+"/changes", ts.cfg.AdminToken, nil, nil)
	require.Len(t, changes.list, 2, "%s", changes.raw)
	require.Equal(t, "alice", changes.list[0]["by"])
	require.Equal(t, "root", changes.list[1]["by"])
}
