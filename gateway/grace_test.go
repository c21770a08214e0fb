package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every voucher carries grace_seconds: 600 unless the operator sets it, 0
// to 3600 when they do, and PATCH changes it (0 is a value, not "no
// change"); a value out of range is invalid_input naming the field.
func TestVoucherGraceSeconds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", bearerOf(testAdminToken)}
	create := func(extra string) (int, map[string]any) {
		t.Helper()
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			`{"title":"Held drop","kind":"seckill","price_cents":100,"stock":5,"per_user_limit":1,`+
				`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z",`+
				`"waiting_room":{"admit_per_second":5}`+extra+`}`, admin...)
		var out map[string]any
		require.NoError(t, json.Unmarshal(body, &out), "%s", body)
		return resp.StatusCode, out
	}

	status, v := create(``)
	require.Equal(t, 201, status, "%v", v)
	require.EqualValues(t, 600, v["grace_seconds"], "the default")
	status, none := create(`,"grace_seconds":0`)
	require.Equal(t, 201, status, "%v", none)
	require.EqualValues(t, 0, none["grace_seconds"])

	resp, body := b.do(t, "GET", "/api/v1/vouchers/"+none["id"].(string), "")
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	var read map[string]any
	require.NoError(t, json.Unmarshal(body, &read))
	require.EqualValues(t, 0, read["grace_seconds"], "kept by the record")

	for _, bad := range []string{`,"grace_seconds":-1`, `,"grace_seconds":3601`} {
		status, out := create(bad)
		require.Equal(t, 400, status, "%s: %v", bad, out)
		require.Contains(t, out["error"].(map[string]any)["fields"], map[string]any{"field": "/grace_seconds",
			"reason": "grace_seconds must be 0 to 3600"}, "%v", out)
	}

	resp, body = b.do(t, "PATCH", "/api/v1/admin/vouchers/"+v["id"].(string), `{"grace_seconds":0}`, admin...)
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	var changed map[string]any
	require.NoError(t, json.Unmarshal(body, &changed))
	require.EqualValues(t, 0, changed["grace_seconds"])
	resp, body = b.do(t, "PATCH", "/api/v1/admin/vouchers/"+v["id"].(string), `{"grace_seconds":4000}`, admin...)
	require.Equal(t, 400, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "/grace_seconds")
}
