package systemtest

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAdminRefusesARepeatedField: a change that names a field twice is
// refused 400 invalid_input and changes nothing; encoding/json took the last
// value, so {"add_stock":1,"add_stock":5} added 5 units where a reader of
// the request saw 1. In PostgreSQL and Redis alike.
func TestAdminRefusesARepeatedField(t *testing.T) {
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
