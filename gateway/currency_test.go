package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVoucherCurrencyOverHTTP: the operator's currency is on the created
// voucher and on the public one; a code of the right shape that ISO 4217
// does not list, lower case or empty, is 400 invalid_input naming /currency.
func TestVoucherCurrencyOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", bearerOf(testAdminToken)}
	create := func(currency string) (int, []byte) {
		t.Helper()
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			`{"title":"Yen drop","kind":"seckill","price_cents":1200,"stock":5,"per_user_limit":1,`+
				`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z","currency":`+currency+`}`, admin...)
		return resp.StatusCode, body
	}
	status, body := create(`"JPY"`)
	require.Equal(t, 201, status, "%s", body)
	var made map[string]any
	require.NoError(t, json.Unmarshal(body, &made))
	require.Equal(t, "JPY", made["currency"])
	resp, body := b.do(t, "GET", "/api/v1/vouchers/"+made["id"].(string), "")
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"currency":"JPY"`)

	for _, bad := range []string{`"ABC"`, `"jpy"`, `""`, `"XXX"`} {
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			`{"title":"t","kind":"seckill","price_cents":1,"stock":1,"per_user_limit":1,`+
				`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z","currency":`+bad+`}`, admin...)
		requireAPIError(t, resp, body, 400, "invalid_input")
		var e struct {
			Error struct {
				Fields []struct{ Field string } `json:"fields"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e))
		require.Len(t, e.Error.Fields, 1, "%s", body)
		require.Equal(t, "/currency", e.Error.Fields[0].Field, bad)
	}
}
