package apitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The validator catches what it is there for: an undeclared status, a body
// off its schema, an undeclared contract header, an unknown path answered
// other than 404, and a frame off its schema; and it lets a good answer pass.
func TestCheckFindsMismatches(t *testing.T) {
	s := MustLoad(t)
	get := httptest.NewRequest(http.MethodGet, "http://x/api/v1/vouchers/12", nil)
	// Every answer carries the request id and the server's clock.
	common := http.Header{"X-Request-Id": {"r1"}, "X-Server-Time": {"1767225600000"}}
	json := common.Clone()
	json.Set("Content-Type", "application/json")
	voucher := `{"id":"12","title":"t","kind":"seckill","price_cents":1,"currency":"CNY","stock_total":1,"stock_left":1,
		"per_user_limit":1,"begin_at":"2026-01-01T00:00:00Z","end_at":"2026-01-02T00:00:00Z",
		"captcha_required":false,"challenge":"none","state":"on_sale","shards":1,"waiting_room":null,"draw":null,"entry":null,"grace_seconds":600}`
	require.NoError(t, s.Check(get, 200, json, []byte(voucher)))
	require.Error(t, s.Check(get, 418, json, []byte(`{"error":{"code":"internal","message":"m"}}`)), "undeclared status")
	require.Error(t, s.Check(get, 200, json, []byte(strings.Replace(voucher, `"seckill"`, `"bogus"`, 1))), "enum")
	h := json.Clone()
	h.Set("Retry-After", "1")
	require.Error(t, s.Check(get, 200, h, []byte(voucher)), "undeclared header")
	unknown := httptest.NewRequest(http.MethodGet, "http://x/nowhere", nil)
	require.NoError(t, s.Check(unknown, 404, json, []byte(`{"error":{"code":"not_found","message":"m"}}`)))
	require.Error(t, s.Check(httptest.NewRequest(http.MethodGet, "http://x/api/v1/nowhere", nil), 200, json, []byte(`{}`)))
	require.NoError(t, s.Check(httptest.NewRequest(http.MethodGet, "http://x/app.js", nil), 200, nil, []byte(`1`)), "a static file")

	page := httptest.NewRequest(http.MethodGet, "http://x/", nil)
	require.NoError(t, s.Check(page, 200, with(common, "Content-Type", "text/html; charset=utf-8"), []byte("<html>")))
	require.Error(t, s.Check(page, 200, with(common, "Content-Type", "text/plain"), []byte("hi")), "undeclared type")

	require.NoError(t, s.CheckFrame([]byte(`{"type":"pong"}`)))
	require.NoError(t, s.CheckFrame([]byte(`{"type":"voucher","voucher":`+voucher+`}`)))
	require.Error(t, s.CheckFrame([]byte(`{"type":"voucher","voucher":{"id":"1"}}`)))
	require.Error(t, s.CheckFrame([]byte(`{"type":"nope"}`)))
}

// with is h with one more header.
func with(h http.Header, name, value string) http.Header {
	h = h.Clone()
	h.Set(name, value)
	return h
}
