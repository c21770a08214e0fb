package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
)

// TestChangeVoucher: PATCH /api/v1/admin/vouchers/{id} steers a running
// sale and answers the voucher; a bad value is 400 invalid_input whose
// message names the field, an ended sale 409 conflict, and the change is
// logged with the operator's name (root: SECKILL_ADMIN_TOKEN).
func TestChangeVoucher(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now().UTC()
	room := b.catalog.put(seckill.Voucher{Title: "Line", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10,
		StockLeft: 10, PerUserLimit: 1, BeginAt: now.Add(-time.Hour), EndAt: now.Add(time.Hour),
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 5}})
	ended := b.catalog.put(seckill.Voucher{Title: "Over", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10,
		StockLeft: 10, PerUserLimit: 1, BeginAt: now.Add(-2 * time.Hour), EndAt: now.Add(-time.Second)})
	admin := []string{"Authorization", "Bearer " + testAdminToken}
	patch := func(id int64, body string, headers ...string) (int, []byte) {
		resp, raw := b.do(t, "PATCH", fmt.Sprintf("/api/v1/admin/vouchers/%d", id), body, headers...)
		return resp.StatusCode, raw
	}

	later := now.Add(3 * time.Hour).Truncate(time.Second)
	status, raw := patch(room.ID, fmt.Sprintf(`{"add_stock": 5, "admit_per_second": 50, "end_at": %q}`, later.Format(time.RFC3339)), admin...)
	require.Equal(t, 200, status, "%s", raw)
	var v api.Voucher
	require.NoError(t, json.Unmarshal(raw, &v))
	require.EqualValues(t, 15, v.StockTotal)
	require.EqualValues(t, 15, v.StockLeft)
	require.EqualValues(t, 50, *v.WaitingRoom.AdmitPerSecond)
	require.True(t, later.Equal(v.EndAt), "end_at %v", v.EndAt)
	logged := b.logs.String()
	require.Contains(t, logged, `"msg":"voucher changed by an operator"`)
	require.Contains(t, logged, `"operator":"root"`)
	require.Contains(t, logged, `"add_stock":5`)
	require.NotContains(t, logged, testAdminToken, "the token itself is never logged")

	for _, c := range []struct{ body, field string }{
		{`{"add_stock": 0}`, "add_stock"},
		{`{"add_stock": -3}`, "add_stock"},
		{`{"add_stock": 10000001}`, "add_stock"},
		{`{"add_stock": "5"}`, "add_stock"},
		{`{"admit_per_second": 0}`, "admit_per_second"},
		{`{"admit_per_second": 100001}`, "admit_per_second"},
		{`{"end_at": "tomorrow"}`, "end_at"},
		{fmt.Sprintf(`{"end_at": %q}`, now.Add(30*time.Minute).Format(time.RFC3339)), "end_at"},
		{`{"stock": 5}`, "stock"},
		{`{}`, "add_stock"},
	} {
		status, raw := patch(room.ID, c.body, admin...)
		require.Equal(t, 400, status, "%s: %s", c.body, raw)
		require.Contains(t, string(raw), `"invalid_input"`, c.body)
		require.Contains(t, string(raw), c.field, "%s: the message names the field: %s", c.body, raw)
	}
	status, raw = patch(b.onSale.ID, `{"admit_per_second": 10}`, admin...)
	require.Equal(t, 400, status, "no waiting room: %s", raw)
	require.Contains(t, string(raw), "admit_per_second")

	status, raw = patch(ended.ID, `{"add_stock": 1}`, admin...)
	require.Equal(t, 409, status, "%s", raw)
	require.Contains(t, string(raw), `"conflict"`)
	status, raw = patch(ended.ID, fmt.Sprintf(`{"end_at": %q}`, later.Format(time.RFC3339)), admin...)
	require.Equal(t, 409, status, "an ended sale is not brought back: %s", raw)

	status, _ = patch(424242, `{"add_stock": 1}`, admin...)
	require.Equal(t, 404, status)
	status, _ = patch(room.ID, `{"add_stock": 1}`, "Authorization", bearerOf(b.shopper))
	require.Equal(t, 403, status)
	status, _ = patch(room.ID, `{"add_stock": 1}`)
	require.Equal(t, 401, status)
	require.False(t, strings.Contains(b.logs.String(), `"add_stock":1`), "refused changes are not logged as made")

	// The change is recorded with who made it: the name the log names,
	// never the token.
	resp, raw := b.do(t, "GET", fmt.Sprintf("/api/v1/admin/vouchers/%d/changes", room.ID), "", admin...)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	var changes []api.VoucherChangeRecord
	require.NoError(t, json.Unmarshal(raw, &changes))
	require.Len(t, changes, 1, "%s", raw)
	require.Equal(t, seckill.RootOperator, changes[0].By)
	require.Contains(t, logged, `"operator":"`+changes[0].By+`"`)
	require.EqualValues(t, 5, changes[0].AddStock)
	require.EqualValues(t, 50, changes[0].AdmitPerSecond)
	require.True(t, later.Equal(*changes[0].EndAt))
	require.EqualValues(t, 15, changes[0].StockTotal)
	resp, raw = b.do(t, "GET", fmt.Sprintf("/api/v1/admin/vouchers/%d/changes", b.onSale.ID), "", admin...)
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `[]`, string(raw), "none made")
	resp, _ = b.do(t, "GET", "/api/v1/admin/vouchers/x/changes", "", admin...)
	require.Equal(t, 400, resp.StatusCode)
	resp, _ = b.do(t, "GET", fmt.Sprintf("/api/v1/admin/vouchers/%d/changes", room.ID), "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 403, resp.StatusCode)
}
