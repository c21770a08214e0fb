package systemtest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLoginOwnerGetsInPastGuesses: the failed logins of a username are
// counted wherever they come from (10 a minute, a burst of 5), and a
// username past that budget used to be refused whatever its password:
// anyone could keep its owner out, right before a sale, with ten wrong
// passwords a minute from changing addresses. Past the budget a login now
// asks for a solved captcha (GET /api/v1/captcha; gateway/edge/README.md,
// "Logins per username"): the owner with the right password and a captcha
// gets in, and guesses stay refused, each needing a captcha of its own.
func TestLoginOwnerGetsInPastGuesses(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{"SECKILL_TRUSTED_PROXIES": "127.0.0.1", "SECKILL_ROLES": "gateway"})
	name := fmt.Sprintf("owner_%d", rand.Int64N(1<<40))
	const right, wrong = "correct-horse-battery", "wrong-horse-battery"
	from := fromAnywhere
	creds := func(password string) map[string]any { return map[string]any{"username": name, "password": password} }
	login := func(body map[string]any) answer {
		return ts.do(t, http.MethodPost, "/api/v1/sessions", "", body, from())
	}
	// withCaptcha adds a solved captcha to body.
	withCaptcha := func(body map[string]any) map[string]any {
		id, answer := ts.captcha(t, from())
		out := map[string]any{"captcha_id": id, "captcha_answer": answer}
		for k, v := range body {
			out[k] = v
		}
		return out
	}
	spend := func() { ts.spendLoginFailures(t, name) }
	a := ts.do(t, http.MethodPost, "/api/v1/users", "", creds(right), from())
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)

	// The owner, right after the guesses, is asked for a captcha: not 429.
	// A unit of the budget may come back between two requests (one every
	// 6 s): then the owner is simply in, and the guesser spends it again.
	for try := 0; ; try++ {
		spend()
		a = login(creds(right))
		if a.status != http.StatusOK || try == 5 {
			break
		}
	}
	require.Equal(t, http.StatusBadRequest, a.status, "the owner's right password past the guesses: %s", a.raw)
	require.Equal(t, "captcha_invalid", a.errorCode())
	require.Contains(t, a.body["error"].(map[string]any)["message"], "captcha")

	// With a solved captcha the owner gets in, however the guesses go on.
	owner := withCaptcha(creds(right))
	spend()
	a = login(owner)
	require.Equal(t, http.StatusOK, a.status, "the owner with a solved captcha: %s", a.raw)
	require.NotEmpty(t, a.body["token"])

	// A guess with a solved captcha is checked, and refused; its captcha
	// is spent, whatever the answer.
	guess := withCaptcha(creds(wrong))
	spend()
	a = login(guess)
	require.Equal(t, http.StatusUnauthorized, a.status, "%s", a.raw)
	a = login(guess)
	require.Equal(t, http.StatusBadRequest, a.status, "a captcha is single use: %s", a.raw)
	require.Equal(t, "captcha_invalid", a.errorCode())
	wrongAnswer := withCaptcha(creds(right))
	wrongAnswer["captcha_answer"] = wrongAnswer["captcha_answer"].(string) + "9"
	a = login(wrongAnswer)
	require.Equal(t, http.StatusBadRequest, a.status, "a wrong answer: %s", a.raw)
	require.Equal(t, "captcha_invalid", a.errorCode())
}

// fromAnywhere is the header of a request from an address of its own, as a
// bot rotating addresses sends them: no per-address budget is spent (the
// system must trust loopback as its proxy).
func fromAnywhere() map[string]string {
	return map[string]string{"X-Forwarded-For": fmt.Sprintf("10.%d.%d.%d", rand.IntN(256), rand.IntN(256), 1+rand.IntN(254))}
}

// spendLoginFailures guesses name's password wrong, from anywhere, until
// its budget of failures is spent: each guess is refused, 401 while the
// budget lasts, then 400 captcha_invalid.
func (ts *testSystem) spendLoginFailures(t *testing.T, name string) {
	t.Helper()
	for range 20 {
		a := ts.do(t, http.MethodPost, "/api/v1/sessions", "", map[string]any{"username": name, "password": "wrong-horse-battery"}, fromAnywhere())
		if a.status == http.StatusUnauthorized {
			continue
		}
		require.Equal(t, http.StatusBadRequest, a.status, "a guess past the username's budget: %s", a.raw)
		require.Equal(t, "captcha_invalid", a.errorCode())
		return
	}
	t.Fatal("20 wrong passwords in a row and the username's budget is not spent")
}
