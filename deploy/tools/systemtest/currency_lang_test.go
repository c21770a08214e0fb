package systemtest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
)

// The voucher's currency and the caller's language through the real
// binary, PostgreSQL (migration 017) and Stripe's mock: an instance whose
// SECKILL_CURRENCY is USD writes it down on a voucher that names none,
// keeps the JPY of one that does, and charges a JPY voucher's order in
// yen; a refusal is said in Chinese or English by Accept-Language with
// the same code, each answer checked against gateway/openapi.yaml by the
// validating client.
func TestVoucherCurrencyAndLanguage(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{
		"SECKILL_CURRENCY":              "USD",
		"SECKILL_PAYMENT_PROVIDER":      "stripe",
		"SECKILL_STRIPE_API_BASE":       stack.StripeMock(t).URL,
		"SECKILL_STRIPE_SECRET_KEY":     devstack.StripeMockKey,
		"SECKILL_STRIPE_WEBHOOK_SECRET": stripetest.Secret,
	})
	create := func(extra map[string]any, header map[string]string) answer {
		t.Helper()
		body := map[string]any{
			"title": "yen voucher", "kind": "seckill", "price_cents": 1200, "stock": 3, "per_user_limit": 1,
			"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
			"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		}
		for k, v := range extra {
			body[k] = v
		}
		return ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, body, header)
	}

	yen := create(map[string]any{"currency": "JPY"}, nil)
	require.Equal(t, http.StatusCreated, yen.status, "%s", yen.raw)
	require.Equal(t, "JPY", yen.body["currency"])
	dollars := create(nil, nil)
	require.Equal(t, http.StatusCreated, dollars.status, "%s", dollars.raw)
	require.Equal(t, "USD", dollars.body["currency"], "the configured currency, written down")
	public := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+yen.body["id"].(string), "", nil, nil)
	require.Equal(t, "JPY", public.body["currency"], "%s", public.raw)

	tok := ts.shopper(t, 43_000_001)
	bought := ts.buy(t, yen.body["id"].(string), tok, 1, "")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	order := bought.body["order_id"].(string)
	ts.waitStatus(t, tok, order, "created")
	pay := ts.do(t, http.MethodPost, "/api/v1/orders/"+order+"/payments", tok, nil, nil)
	require.Equal(t, http.StatusCreated, pay.status, "%s", pay.raw)
	require.Equal(t, "JPY", pay.body["currency"], "charged in the voucher's currency, not the instance's")
	require.EqualValues(t, 1200, pay.body["amount_cents"], "yen, the minor unit of JPY")

	for _, c := range []struct{ accept, lang, message string }{
		{"zh-CN,zh;q=0.9,en;q=0.8", "zh-CN", "currency 必须是大写的 ISO 4217 货币代码，例如 CNY、USD 或 JPY"},
		{"en-US,en;q=0.9", "en", "currency must be an ISO 4217 code in capitals, such as CNY, USD or JPY"},
	} {
		bad := create(map[string]any{"currency": "ABC"}, map[string]string{"Accept-Language": c.accept})
		require.Equal(t, http.StatusBadRequest, bad.status, "%s", bad.raw)
		require.Equal(t, "invalid_input", bad.errorCode(), "the code never changes with the language")
		require.Equal(t, c.message, bad.body["error"].(map[string]any)["message"], "%s", bad.raw)
		require.Equal(t, c.lang, bad.header.Get("Content-Language"))
		var vary []string
		for part := range strings.SplitSeq(strings.Join(bad.header.Values("Vary"), ","), ",") {
			vary = append(vary, strings.TrimSpace(part))
		}
		require.Contains(t, vary, "Accept-Language", "a cache keeps one answer per language")
	}
}
