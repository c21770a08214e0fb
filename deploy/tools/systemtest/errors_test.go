package systemtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestErrorRowsOverRealServices walks the error table (gateway/openapi.yaml) through the real
// stack, for every row the buying foundation can produce, and checks that
// the refused requests changed nothing.
func TestErrorRowsOverRealServices(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	now := time.Now()
	onSale := ts.createVoucher(t, 4, 2, now.Add(-time.Second), now.Add(time.Hour))
	future := ts.createVoucher(t, 3, 1, now.Add(time.Hour), now.Add(2*time.Hour))
	ended := ts.createVoucher(t, 3, 1, now.Add(-2*time.Hour), now.Add(-time.Hour))
	alice := ts.shopper(t, 91)
	bob := ts.shopper(t, 92)

	type row struct {
		name   string
		do     func() answer
		status int
		code   string
	}
	rows := []row{
		{"no token", func() answer { return ts.buy(t, onSale, "", 1, "") }, 401, "unauthenticated"},
		{"bad token", func() answer { return ts.buy(t, onSale, "not.a.jwt", 1, "") }, 401, "unauthenticated"},
		{"shopper on admin route", func() answer {
			return ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+onSale+"/stats", alice, nil, nil)
		}, 403, "forbidden"},
		{"unknown voucher", func() answer { return ts.buy(t, "987654321987", alice, 1, "") }, 404, "not_found"},
		{"bad voucher id", func() answer { return ts.buy(t, "12abc", alice, 1, "") }, 400, "invalid_input"},
		{"zero quantity", func() answer { return ts.buy(t, onSale, alice, 0, "") }, 400, "invalid_input"},
		{"key too long", func() answer { return ts.buy(t, onSale, alice, 1, strings.Repeat("k", 65)) }, 400, "invalid_input"},
		{"unknown field", func() answer {
			return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+onSale+"/orders", alice, map[string]any{"quantity": 1, "coupon": "x"}, nil)
		}, 400, "invalid_input"},
		{"body too large", func() answer {
			return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+onSale+"/orders", alice, map[string]any{"captcha_answer": strings.Repeat("x", 8<<10)}, nil)
		}, 413, "too_large"},
		{"not started", func() answer { return ts.buy(t, future, alice, 1, "") }, 409, "not_started"},
		{"ended", func() answer { return ts.buy(t, ended, alice, 1, "") }, 409, "ended"},
		{"over the limit in one go", func() answer { return ts.buy(t, onSale, alice, 3, "") }, 409, "limit_exceeded"},
		{"someone else's order", func() answer {
			a := ts.buy(t, onSale, bob, 1, "bob-1")
			require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
			return ts.do(t, http.MethodGet, "/api/v1/orders/"+a.body["order_id"].(string), alice, nil, nil)
		}, 404, "not_found"},
		{"limit reached", func() answer {
			a := ts.buy(t, onSale, alice, 2, "alice-1")
			require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
			return ts.buy(t, onSale, alice, 1, "")
		}, 409, "limit_exceeded"},
		{"not enough left for the quantity", func() answer { return ts.buy(t, onSale, ts.shopper(t, 93), 2, "") }, 409, "sold_out"},
		{"username taken", func() answer {
			body := map[string]any{"username": "carol", "password": "a long password"}
			require.Equal(t, http.StatusCreated, ts.do(t, http.MethodPost, "/api/v1/users", "", body, nil).status)
			return ts.do(t, http.MethodPost, "/api/v1/users", "", body, nil)
		}, 409, "username_taken"},
		{"wrong password", func() answer {
			return ts.do(t, http.MethodPost, "/api/v1/sessions", "", map[string]any{"username": "carol", "password": "not the password"}, nil)
		}, 401, "unauthenticated"},
		{"invalid voucher", func() answer {
			return ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
				"title": "x", "kind": "seckill", "price_cents": 1, "stock": 0, "per_user_limit": 1,
				"begin_at": now.Format(time.RFC3339), "end_at": now.Add(time.Hour).Format(time.RFC3339),
			}, nil)
		}, 400, "invalid_input"},
		{"wrong admin token", func() answer {
			return ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+onSale+"/stats", "wrong", nil, nil)
		}, 401, "unauthenticated"},
	}
	for _, r := range rows {
		a := r.do()
		require.Equal(t, r.status, a.status, "%s: %s", r.name, a.raw)
		require.Equal(t, r.code, a.errorCode(), "%s: %s", r.name, a.raw)
		msg, _ := a.body["error"].(map[string]any)["message"].(string)
		require.NotEmpty(t, msg, "%s: every error says what happened", r.name)
		for _, leak := range []string{"redis", "pgx", "sarama", "SQLSTATE", "goroutine", ".go:"} {
			require.NotContains(t, strings.ToLower(msg), strings.ToLower(leak), "%s: the message leaks internals", r.name)
		}
	}

	// The refusals took nothing: 3 of 4 units were sold, to bob (1) and alice (2).
	ts.waitPersisted(t, onSale, 2)
	require.EqualValues(t, 3, ts.checkInvariants(t, onSale, 2))
	for _, v := range []string{future, ended} {
		a := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+v, "", nil, nil)
		require.Equal(t, http.StatusOK, a.status)
		require.EqualValues(t, 3, a.body["stock_left"], fmt.Sprintf("voucher %s lost stock to a refused buy", v))
	}
}
