package systemtest

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// Registering costs a bot something: with SECKILL_REGISTER_CHALLENGE=
// captcha a registration without a captcha, or with a wrong or used one,
// is 400 challenge_invalid and makes no account; a solved one makes it;
// and one address makes SECKILL_REGISTER_BURST accounts at once, then 429.
func TestRegisterTakesAChallenge(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{"SECKILL_REGISTER_CHALLENGE": "captcha",
		"SECKILL_REGISTER_BURST": "3", "SECKILL_REGISTER_RATE": "1", "SECKILL_TRUSTED_PROXIES": "127.0.0.1"})
	// Addresses of this run's own: the budgets are fleet-wide in Redis,
	// which the package's tests share.
	octet := func() string { return strconv.Itoa(1 + rand.IntN(250)) }
	net := "10." + octet() + "." + octet() + "."
	from := map[string]string{"X-Forwarded-For": net + "1"}
	captcha := func() (id, answer string) {
		c := ts.do(t, http.MethodGet, "/api/v1/captcha", "", nil, nil)
		require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
		id = c.body["captcha_id"].(string)
		answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
		require.NoError(t, err)
		return id, answer
	}
	name := newShopperName()
	creds := map[string]any{"username": name, "password": "correct horse"}

	a := ts.do(t, http.MethodPost, "/api/v1/users", "", creds, from)
	require.Equal(t, http.StatusBadRequest, a.status, "%s", a.raw)
	require.Equal(t, "challenge_invalid", a.errorCode())
	id, answer := captcha()
	wrong := map[string]any{"username": name, "password": "correct horse", "captcha_id": id, "captcha_answer": answer + "x"}
	a = ts.do(t, http.MethodPost, "/api/v1/users", "", wrong, from)
	require.Equal(t, "challenge_invalid", a.errorCode(), "%s", a.raw)
	used := map[string]any{"username": name, "password": "correct horse", "captcha_id": id, "captcha_answer": answer}
	a = ts.do(t, http.MethodPost, "/api/v1/users", "", used, from)
	require.Equal(t, "challenge_invalid", a.errorCode(), "a captcha serves one try: %s", a.raw)
	login := ts.do(t, http.MethodPost, "/api/v1/sessions", "", creds, from)
	require.Equal(t, http.StatusUnauthorized, login.status, "no account was made: %s", login.raw)

	// The burst of 3 was spent by the three tries above: the address's
	// fourth registration is refused before its captcha is judged.
	id, answer = captcha()
	solved := map[string]any{"username": name, "password": "correct horse", "captcha_id": id, "captcha_answer": answer}
	a = ts.do(t, http.MethodPost, "/api/v1/users", "", solved, from)
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s", a.raw)
	require.NotEmpty(t, a.header.Get("Retry-After"))

	// Another address, with the (unspent) captcha: the account is made.
	a = ts.do(t, http.MethodPost, "/api/v1/users", "", solved, map[string]string{"X-Forwarded-For": net + "2"})
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	login = ts.do(t, http.MethodPost, "/api/v1/sessions", "", creds, from)
	require.Equal(t, http.StatusOK, login.status, "%s", login.raw)
}
