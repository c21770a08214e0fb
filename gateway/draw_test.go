package gateway

import (
	"fmt"
	"testing"

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
