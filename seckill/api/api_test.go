package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
)

// The bytes clients have always been sent: field order, nulls and the
// fields left out are part of the contract, not only the names.
func TestWireBytes(t *testing.T) {
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	pass := "p1"
	order := api.Order{OrderID: "7", VoucherID: "3", UserID: "42", Quantity: 1, AmountCents: 500, Status: "reserved", CreatedAt: at}
	queue := api.Queue{VoucherID: "3", State: "admitted", Pass: &pass, PassExpiresAt: &at}
	for _, c := range []struct {
		v    any
		want string
	}{
		{api.Frame{Type: api.FrameOrder, Order: &order},
			`{"type":"order","order":{"order_id":"7","voucher_id":"3","user_id":"42","quantity":1,"amount_cents":500,"status":"reserved","created_at":"2026-12-03T08:00:00Z","pay_deadline":null,"payment":null}}`},
		{api.Frame{Type: api.FrameQueue, Queue: &queue},
			`{"type":"queue","queue":{"voucher_id":"3","state":"admitted","position":0,"ahead":0,"eta_seconds":0,"pass":"p1","pass_expires_at":"2026-12-03T08:00:00Z"}}`},
		{api.Frame{Type: api.FramePong}, api.PongFrame},
		{api.Ready{Status: "ready", Checks: map[string]string{"redis": "ok", "kafka": "ok"}},
			`{"checks":{"kafka":"ok","redis":"ok"},"status":"ready"}`},
		{api.Health{Status: "ok"}, `{"status":"ok"}`},
		{api.ErrorBody{Error: api.ErrorDetail{Code: "sold_out", Message: "this voucher is sold out"}},
			`{"error":{"code":"sold_out","message":"this voucher is sold out"}}`},
		{api.Purchase{OrderID: "7", Status: "reserved"}, `{"order_id":"7","status":"reserved"}`},
		{api.Voucher{ID: "3", Title: "t", Kind: "seckill", BeginAt: at, EndAt: at, State: "on_sale", Shards: 1},
			`{"id":"3","title":"t","kind":"seckill","price_cents":0,"currency":"","stock_total":0,"stock_left":0,"per_user_limit":0,"begin_at":"2026-12-03T08:00:00Z","end_at":"2026-12-03T08:00:00Z","captcha_required":false,"challenge":"","state":"on_sale","shards":1,"waiting_room":null,"draw":null,"entry":null,"grace_seconds":0}`},
		{api.Stats{VoucherID: "3"},
			`{"voucher_id":"3","stock_total":0,"stock_left":0,"reserved":0,"created":0,"paid":0,"cancelled":0,"failed":0}`},
		{api.Breaker{Mode: "auto", State: "closed"}, `{"mode":"auto","state":"closed"}`},
	} {
		b, err := json.Marshal(c.v)
		require.NoError(t, err)
		require.Equal(t, c.want, string(b), "%T", c.v)
	}
}

// A client's message is read for its type alone, whatever else it holds.
func TestClientFrameReadsTheTypeAlone(t *testing.T) {
	var f api.ClientFrame
	require.NoError(t, json.Unmarshal([]byte(`{"type":"ping","order":1,"queue":"x"}`), &f))
	require.Equal(t, api.FramePing, f.Type)
}
