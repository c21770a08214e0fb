package gateway

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
)

// The draw's export names what is wrong with the request: an unknown
// voucher is 404, one that exists but is not sold by draw (a plain sale,
// or a waiting room in line order) is 409 conflict, so a voucher just
// created never reads as missing.
func TestDrawEntriesOfAVoucherNotSoldByDraw(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plain := b.catalog.put(seckill.Voucher{Title: "p", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1})
	common := b.catalog.put(seckill.Voucher{Title: "c", Kind: seckill.KindCommon, StockTotal: 5, PerUserLimit: 1})
	inLine := b.catalog.put(seckill.Voucher{Title: "l", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 10, Mode: seckill.RoomLine}})
	for _, id := range []int64{plain.ID, common.ID, inLine.ID} {
		resp, body := b.do(t, "GET", fmt.Sprintf("/api/v1/admin/vouchers/%d/draw/entries", id), "", "Authorization", bearerOf(testAdminToken))
		requireAPIError(t, resp, body, 409, "conflict")
	}
	resp, body := b.do(t, "GET", "/api/v1/admin/vouchers/424242/draw/entries", "", "Authorization", bearerOf(testAdminToken))
	requireAPIError(t, resp, body, 404, "not_found")

	// Anyone's entry list: a voucher not sold by draw has none (404), nor
	// one that does not exist; a bad id is 400.
	for _, id := range []int64{plain.ID, inLine.ID, 424242} {
		resp, body := b.do(t, "GET", fmt.Sprintf("/api/v1/vouchers/%d/draw/entries", id), "")
		requireAPIError(t, resp, body, 404, "not_found")
	}
	resp, body = b.do(t, "GET", "/api/v1/vouchers/x/draw/entries", "")
	requireAPIError(t, resp, body, 400, "invalid_input")
}

// A draw that holds cards needs a provider that holds money: without one
// (the demo provider) the voucher is refused with 400 invalid_input naming
// waiting_room.draw_hold, as is a hold asked of a room in line order.
func TestDrawHoldRefusedWithoutHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, mode := range []string{"draw", "line"} {
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			`{"title":"Held","kind":"seckill","price_cents":100,"stock":8,"per_user_limit":1,`+
				`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z",`+
				`"waiting_room":{"admit_per_second":5,"prequeue_seconds":60,"mode":"`+mode+`","draw_hold":true}}`,
			"Authorization", bearerOf(testAdminToken))
		msg := requireAPIError(t, resp, body, 400, "invalid_input")
		require.Contains(t, msg, "draw_hold", mode)
	}
	resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
		`{"title":"Not held","kind":"seckill","price_cents":100,"stock":8,"per_user_limit":1,`+
			`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z",`+
			`"waiting_room":{"admit_per_second":5,"prequeue_seconds":60,"mode":"draw","draw_hold":false}}`,
		"Authorization", bearerOf(testAdminToken))
	require.Equal(t, 201, resp.StatusCode, "%s", body)
	require.NotContains(t, string(body), "draw_hold", "absent when false")
}
