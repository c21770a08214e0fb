package systemtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAdminRefusesARepeatedField: a change that names a field twice is
// refused 400 invalid_input and changes nothing; encoding/json took the last
// value, so {"add_stock":1,"add_stock":5} added 5 units where a reader of
// the request saw 1. In PostgreSQL and Redis alike.
func TestAdminRefusesARepeatedField(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 5, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	for _, body := range []string{`{"add_stock":1,"add_stock":5}`, `{"add_stock":1,"ADD_STOCK":5}`} {
		r := ts.do(t, http.MethodPatch, "/api/v1/admin/vouchers/"+vid, ts.cfg.AdminToken, json.RawMessage(body), nil)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.raw)
		require.Equal(t, "invalid_input", r.errorCode())
		require.Contains(t, string(r.raw), "add_stock", "the message names the field")
	}
	r := ts.do(t, http.MethodPut, "/api/v1/admin/breaker", ts.cfg.AdminToken, json.RawMessage(`{"mode":"auto","mode":"open"}`), nil)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.raw)
	require.Equal(t, "auto", ts.do(t, http.MethodGet, "/api/v1/admin/breaker", ts.cfg.AdminToken, nil, nil).body["mode"], "the breaker stays")

	time.Sleep(300 * time.Millisecond) // a change would reach the catalog's copy within its refresh
	v := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil)
	require.EqualValues(t, 5, v.body["stock_total"], "nothing was added: %s", v.raw)
	require.EqualValues(t, 5, ts.stockLeft(t, vid))
	require.EqualValues(t, 5, ts.stockTotal(t, vid), "nor in PostgreSQL")
	require.Zero(t, ts.checkInvariants(t, vid, 1), "Redis and PostgreSQL agree, nothing sold")
}

// stockTotal is the voucher's stock_total as PostgreSQL has it.
func (ts *testSystem) stockTotal(t *testing.T, voucherID string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(voucherID, 10, 64)
	require.NoError(t, err)
	var total int64
	require.NoError(t, ts.pool.QueryRow(t.Context(), `SELECT stock_total FROM vouchers WHERE id = $1`, id).Scan(&total))
	return total
}

// TestAdminChangesOnceByKey: an operator's change sent again with its
// Idempotency-Key (its answer lost, on the same gateway or another, or
// many at once) is answered as the first was and changes nothing again;
// the same key with another request is 409 conflict. PATCH added the stock
// again on every retry before.
func TestAdminChangesOnceByKey(t *testing.T) {
	t.Parallel()
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	vid := a.createVoucher(t, 5, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	path := "/api/v1/admin/vouchers/" + vid
	patch := func(gw *testSystem, body, key string) answer {
		t.Helper()
		return gw.do(t, http.MethodPatch, path, gw.cfg.AdminToken, json.RawMessage(body), map[string]string{"Idempotency-Key": key})
	}

	first := patch(a, `{"add_stock": 3}`, "more-stock-1")
	require.Equal(t, http.StatusOK, first.status, "%s", first.raw)
	require.EqualValues(t, 8, first.body["stock_total"])
	// The answer was lost: the operator (or a proxy) sends it again, here
	// and on the other gateway.
	for _, gw := range []*testSystem{a, b.testSystem} {
		again := patch(gw, `{"add_stock": 3}`, "more-stock-1")
		require.Equal(t, http.StatusOK, again.status, "%s", again.raw)
		require.JSONEq(t, string(first.raw), string(again.raw), "the first answer, replayed")
	}
	other := patch(b.testSystem, `{"add_stock": 4}`, "more-stock-1")
	require.Equal(t, http.StatusConflict, other.status, "%s", other.raw)
	require.Equal(t, "conflict", other.errorCode())
	require.Contains(t, string(other.raw), "Idempotency-Key")

	// Many retries at once, on both gateways: one change.
	var wg sync.WaitGroup
	answers := make([]answer, 8)
	for i := range answers {
		gw := []*testSystem{a, b.testSystem}[i%2]
		wg.Go(func() { answers[i] = patch(gw, `{"add_stock": 2}`, "more-stock-2") })
	}
	wg.Wait()
	for _, r := range answers {
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
		require.JSONEq(t, string(answers[0].raw), string(r.raw), "every retry gets the one answer")
	}
	require.EqualValues(t, 10, answers[0].body["stock_total"])

	time.Sleep(300 * time.Millisecond) // a second change would reach the catalog within its refresh
	require.EqualValues(t, 10, a.stockTotal(t, vid), "3 and 2 added, once each")
	require.EqualValues(t, 10, a.stockLeft(t, vid))
	require.Zero(t, a.checkInvariants(t, vid, 1), "Redis and PostgreSQL agree")
	changes := a.do(t, http.MethodGet, path+"/changes", a.cfg.AdminToken, nil, nil)
	require.Len(t, changes.list, 2, "two changes recorded: %s", changes.raw)

	// Every change is keyed the same way: a voucher created once, a pause
	// and a switch replayed.
	body := json.RawMessage(`{"title":"once","kind":"seckill","price_cents":100,"stock":3,"per_user_limit":1,` +
		`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"}`)
	c1 := a.do(t, http.MethodPost, "/api/v1/admin/vouchers", a.cfg.AdminToken, body, map[string]string{"Idempotency-Key": "new-1"})
	require.Equal(t, http.StatusCreated, c1.status, "%s", c1.raw)
	c2 := b.do(t, http.MethodPost, "/api/v1/admin/vouchers", b.cfg.AdminToken, body, map[string]string{"Idempotency-Key": "new-1"})
	require.Equal(t, http.StatusCreated, c2.status, "%s", c2.raw)
	require.Equal(t, c1.body["id"], c2.body["id"], "one voucher")
	var created int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM vouchers WHERE title = 'once'`).Scan(&created))
	require.Equal(t, 1, created)
	for _, gw := range []*testSystem{a, b.testSystem} {
		p := gw.do(t, http.MethodPut, path+"/state", gw.cfg.AdminToken, map[string]any{"state": "paused"}, map[string]string{"Idempotency-Key": "pause-1"})
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
		s := gw.do(t, http.MethodPut, "/api/v1/admin/breaker", gw.cfg.AdminToken, map[string]any{"mode": "auto"}, map[string]string{"Idempotency-Key": "breaker-1"})
		require.Equal(t, http.StatusOK, s.status, "%s", s.raw)
	}
	trail := a.do(t, http.MethodGet, "/api/v1/admin/actions", a.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, trail.status, "%s", trail.raw)
	var kinds []string
	for _, e := range trail.body["actions"].([]any) {
		kinds = append(kinds, e.(map[string]any)["action"].(string))
	}
	require.Equal(t, []string{"voucher.create", "voucher.change", "voucher.change", "voucher.create", "voucher.pause", "breaker.switch"}, kinds,
		"each change once in the trail")
}
