package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
)

// TestRefusalsInTheCallersLanguage: real refusals (an unknown voucher, a
// sold-out buy, an operator's voucher with several bad fields, a body that
// is not JSON) are said in Chinese to a caller whose Accept-Language
// prefers it, in English otherwise, with the same status and code; the
// answer names its language and varies on Accept-Language.
func TestRefusalsInTheCallersLanguage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", bearerOf(testAdminToken)}
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, seckill.ErrSoldOut
	})
	badVoucher := `{"title":"t","kind":"seckill","price_cents":1,"stock":0,"per_user_limit":1,` +
		`"begin_at":"2030-01-02T00:00:00Z","end_at":"2030-01-01T00:00:00Z"}`
	for _, c := range []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code, en, zh             string
		zhReasons                []string
	}{
		{name: "not found", method: "GET", path: "/api/v1/vouchers/999999", status: 404, code: "not_found",
			en: "we could not find what you asked for", zh: "找不到你请求的内容"},
		{name: "sold out", method: "POST", path: fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID),
			headers: []string{"Authorization", bearerOf(b.shopper)}, status: 409, code: "sold_out",
			en: "this voucher is sold out", zh: "已售罄"},
		{name: "bad fields", method: "POST", path: "/api/v1/admin/vouchers", body: badVoucher, headers: admin,
			status: 400, code: "invalid_input",
			en:        "stock must be 1 to 10000000; end_at must be after begin_at",
			zh:        "stock 必须为 1 到 10000000；end_at 必须晚于 begin_at",
			zhReasons: []string{"stock 必须为 1 到 10000000", "end_at 必须晚于 begin_at"}},
		{name: "not JSON", method: "POST", path: "/api/v1/admin/vouchers", body: `{"title":`, headers: admin,
			status: 400, code: "invalid_input", en: "the body is not valid JSON", zh: "请求体不是有效的 JSON"},
	} {
		for _, lang := range []struct{ accept, want, msg string }{
			{"", "en", c.en},
			{"en-US,en;q=0.9", "en", c.en},
			{"zh-CN,zh;q=0.9,en;q=0.8", "zh-CN", c.zh},
			{"en;q=0.5, zh-TW", "zh-CN", c.zh},
			{"fr-FR, *;q=0.1", "en", c.en},
		} {
			headers := append([]string{"Accept-Language", lang.accept}, c.headers...)
			resp, body := b.do(t, c.method, c.path, c.body, headers...)
			msg := requireAPIError(t, resp, body, c.status, c.code)
			require.Equal(t, lang.msg, msg, "%s, Accept-Language %q", c.name, lang.accept)
			require.Equal(t, lang.want, resp.Header.Get("Content-Language"), c.name)
			require.True(t, varies(resp, "Accept-Language"), "%s: Vary %q", c.name, resp.Header.Values("Vary"))
			if lang.want == "zh-CN" && c.zhReasons != nil {
				e := decode[api.ErrorBody](t, body)
				reasons := make([]string, len(e.Error.Fields))
				for i, f := range e.Error.Fields {
					reasons[i] = f.Reason
				}
				require.Equal(t, c.zhReasons, reasons, c.name)
			}
		}
	}
}

// varies says whether resp's Vary names header.
func varies(resp *http.Response, header string) bool {
	for _, v := range resp.Header.Values("Vary") {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), header) {
				return true
			}
		}
	}
	return false
}
