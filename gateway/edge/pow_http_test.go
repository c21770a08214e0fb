package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// Over HTTP: an operator makes a pow voucher (challenge and
// captcha_required kept in step), a shopper gets a challenge for it, buys
// with the solution once, and every bad ask is the documented 400 or 404.
func TestChallengeOverHTTP(t *testing.T) {
	t.Parallel()
	g := newLiveGateway(t, edge.Config{PoW: edge.PoWConfig{BaseBits: 8, MaxBits: 10}})
	begin := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	create := func(extra string) (int, map[string]any) {
		body := `{"title":"pow","kind":"seckill","price_cents":100,"stock":5,"per_user_limit":5,` +
			`"begin_at":"` + begin + `","end_at":"` + end + `"` + extra + `}`
		status, _, raw := g.do(t, http.MethodPost, "/api/v1/admin/vouchers", body, catalogAdmin, "")
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &out), raw)
		return status, out
	}
	status, pow := create(`,"challenge":"pow"`)
	require.Equal(t, http.StatusCreated, status, pow)
	require.Equal(t, "pow", pow["challenge"])
	require.Equal(t, false, pow["captcha_required"])
	status, capt := create(`,"challenge":"captcha"`)
	require.Equal(t, http.StatusCreated, status, capt)
	require.Equal(t, true, capt["captcha_required"])
	status, old := create(`,"captcha_required":true`)
	require.Equal(t, http.StatusCreated, status, old)
	require.Equal(t, "captcha", old["challenge"])
	status, none := create(``)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "none", none["challenge"])
	for _, bad := range []string{`,"challenge":"pow","captcha_required":true`, `,"challenge":"quiz"`, `,"challenge":"none","captcha_required":true`} {
		status, out := create(bad)
		require.Equal(t, http.StatusBadRequest, status, bad)
		require.Equal(t, "invalid_input", out["error"].(map[string]any)["code"], bad)
	}

	powID, noneID := pow["id"].(string), none["id"].(string)
	for path, want := range map[string]int{
		"/api/v1/challenges":                          http.StatusConflict,
		"/api/v1/challenges?voucher_id=x":             http.StatusBadRequest,
		"/api/v1/challenges?voucher_id=999999999":     http.StatusNotFound,
		"/api/v1/challenges?voucher_id=" + noneID:     http.StatusConflict,
		"/api/v1/captcha?kind=smell":                  http.StatusBadRequest,
		"/api/v1/captcha?kind=":                       http.StatusBadRequest,
		"/api/v1/challenges?voucher_id=" + powID + "": http.StatusOK,
	} {
		status, _, raw := g.do(t, http.MethodGet, path, "", "", "10.2.0.1")
		require.Equal(t, want, status, "%s: %s", path, raw)
	}

	status, _, raw := g.do(t, http.MethodGet, "/api/v1/captcha?kind=audio", "", "", "10.2.0.1")
	require.Equal(t, http.StatusOK, status, raw)
	var audio struct{ CaptchaID, Audio, Image string }
	require.NoError(t, json.Unmarshal([]byte(raw), &audio))
	require.True(t, strings.HasPrefix(audio.Audio, "data:audio/wav;base64,"))
	require.Empty(t, audio.Image)

	token := g.token(t, 41)
	buyPath := "/api/v1/vouchers/" + powID + "/orders"
	status, _, raw = g.do(t, http.MethodPost, buyPath, `{}`, token, "10.2.0.1")
	require.Equal(t, http.StatusBadRequest, status, raw)
	require.Contains(t, raw, `"challenge_invalid"`)

	status, _, raw = g.do(t, http.MethodGet, "/api/v1/challenges?voucher_id="+powID, "", "", "10.2.0.1")
	require.Equal(t, http.StatusOK, status, raw)
	var ch struct {
		ChallengeID    string `json:"challenge_id"`
		Kind           string `json:"kind"`
		Algorithm      string `json:"algorithm"`
		Salt           string `json:"salt"`
		DifficultyBits int    `json:"difficulty_bits"`
		ExpiresAt      time.Time
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &ch))
	require.Equal(t, "pow", ch.Kind)
	require.Equal(t, "SHA-256", ch.Algorithm)
	require.GreaterOrEqual(t, ch.DifficultyBits, 8)
	nonce := edge.Solve(ch.Salt, ch.DifficultyBits)
	body := `{"challenge_id":"` + ch.ChallengeID + `","challenge_answer":"` + nonce + `"}`
	status, _, raw = g.do(t, http.MethodPost, buyPath, body, token, "10.2.0.1")
	require.Equal(t, http.StatusAccepted, status, raw)
	// Spent: the test's stock is not warmed, so a second buy would be
	// refused as sold out before its challenge is read; the store says it.
	n, err := stack.Redis(t).Exists(context.Background(), edge.PoWKeyPrefix+ch.ChallengeID).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}
