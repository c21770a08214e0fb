package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/gateway/edge"
)

// TestBrowserCaptchaBuy: on a voucher that asks for a captcha, Buy without
// an answer asks for one and sends nothing; a wrong answer says so and shows
// a new picture; the right answer buys.
func TestBrowserCaptchaBuy(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := newVoucher(t, ts, "Signed first edition", 5, 1, func(b map[string]any) { b["captcha_required"] = true })
	b := openBrowser(t, ts.base)
	b.waitCard(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	answerBox := "#captcha-" + vid
	b.waitJS("the captcha picture", fmt.Sprintf(
		`window.__captchaIDs.length === 1 && !document.querySelector('%s .captcha').hidden`, card(vid)))
	b.screenshot("captcha")

	b.do("press Buy with no answer", chromedp.Click(chromedp.CSS(card(vid)+" .buy")))
	require.Equal(t, "Please type the characters from the captcha picture first.", b.message())
	require.Equal(t, "0", b.eval(`document.querySelectorAll('[data-order-id]').length`), "nothing was bought")
	require.Equal(t, "captcha-"+vid, b.eval(`document.activeElement.id`), "the answer box has the focus")

	b.do("type a wrong answer and press Buy",
		chromedp.SendKeys(answerBox, "wrong"),
		chromedp.Click(chromedp.CSS(card(vid)+" .buy")))
	b.waitJS("the wrong-answer message", `document.querySelector('#message').textContent.includes('captcha answer')`)
	require.Equal(t, "The captcha answer wasn’t right (or it expired). Here’s a new picture — please try again.", b.message())
	b.waitJS("a new picture", `window.__captchaIDs.length === 2`)
	require.Equal(t, "0", b.eval(`document.querySelectorAll('[data-order-id]').length`), "nothing was bought")

	id, err := strconv.Unquote(b.eval(`JSON.stringify(window.__captchaIDs[1])`))
	require.NoError(t, err)
	answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err, "the page shows the captcha the gateway keeps")
	b.eval(fmt.Sprintf(`document.querySelector('%s').value = ''`, answerBox))
	b.do("type the right answer", chromedp.SendKeys(answerBox, answer))
	order := b.buy(vid)
	b.waitStatus(order, "created", 30*time.Second)
	b.screenshot("captcha-bought")
}

// TestBrowserLoginCaptcha: once someone has spent a username's failed
// logins, the page's Log in gets 400 captcha_invalid: it shows a captcha
// under the password, says why, and the owner who types its characters
// gets in.
func TestBrowserLoginCaptcha(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{"SECKILL_TRUSTED_PROXIES": "127.0.0.1"})
	name, password := newShopperName(), "correct horse battery"
	a := ts.do(t, http.MethodPost, "/api/v1/users", "", map[string]any{"username": name, "password": password}, fromAnywhere())
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	spend := func() { ts.spendLoginFailures(t, name) }

	b := openBrowser(t, ts.base)
	b.do("fill in the account", chromedp.SendKeys(chromedp.ID("username"), name), chromedp.SendKeys(chromedp.ID("password"), password))
	// A unit of the budget comes back every 6 s: if one did before the
	// click, the owner is simply in, and the guesser spends it again.
	for try := 0; ; try++ {
		spend()
		b.do("press Log in", chromedp.Click(chromedp.ID("login")))
		b.waitJS("a captcha, or logged in", `!document.querySelector('#login-captcha').hidden || !document.querySelector('#account-bar').hidden`)
		if b.eval(`String(document.querySelector('#login-captcha').hidden)`) == "false" || try == 3 {
			break
		}
		b.do("log out", chromedp.Click(chromedp.ID("logout")))
		b.waitJS("logged out", `!document.querySelector('#auth').hidden`)
		b.do("type the password again", chromedp.SendKeys(chromedp.ID("password"), password))
	}
	b.waitJS("the captcha picture", `window.__captchaIDs.length === 1 && !document.querySelector('#login-captcha-img').hidden`)
	require.Contains(t, b.message(), "Type the characters in the picture")
	require.Equal(t, "true", b.eval(`String(document.querySelector('#account-bar').hidden)`), "not logged in")
	b.screenshot("login-captcha")

	id, err := strconv.Unquote(b.eval(`JSON.stringify(window.__captchaIDs[0])`))
	require.NoError(t, err)
	answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err, "the page shows the captcha the gateway keeps")
	if b.eval(`document.querySelector('#password').value`) == "" {
		b.do("type the password again", chromedp.SendKeys(chromedp.ID("password"), password))
	}
	b.do("type the characters and log in", chromedp.SendKeys(chromedp.ID("login-captcha-answer"), answer), chromedp.Click(chromedp.ID("login")))
	b.waitJS("logged in", `!document.querySelector('#account-bar').hidden && document.querySelector('#whoami').textContent === `+strconv.Quote(name))
	require.Contains(t, b.message(), "Welcome back")
	require.Equal(t, "true", b.eval(`String(document.querySelector('#login-captcha').hidden)`), "the captcha is put away")
}

// TestBrowserRegisterCaptcha: with SECKILL_REGISTER_CHALLENGE=captcha
// (production's default), Create account is first answered 400
// challenge_invalid: the page shows a captcha and says why; a wrong answer
// shows a new picture and creates nothing; the right answer creates the
// account and logs in.
//
// The system runs on a Redis of its own: the page's sign-up and logins come
// from loopback, whose per-address budgets are fleet-wide in Redis, and the
// package's other tests spend loopback's too.
func TestBrowserRegisterCaptcha(t *testing.T) {
	t.Parallel()
	srv, rdb := stacktest.PrivateRedis(t)
	ts := startSystem(t, map[string]string{"SECKILL_REGISTER_CHALLENGE": "captcha", "SECKILL_REDIS_URL": "redis://" + srv.Addr + "/0"})
	name, password := newShopperName(), "correct horse battery"
	b := openBrowser(t, ts.base)
	b.do("fill in the account and press Create account",
		chromedp.SendKeys(chromedp.ID("username"), name),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("register")))
	b.waitJS("the captcha picture", `window.__captchaIDs.length === 1 && !document.querySelector('#login-captcha-img').hidden`)
	require.Contains(t, b.message(), "Creating an account takes a captcha")
	require.Contains(t, b.eval(`document.querySelector('#login-captcha-why').textContent`), "Creating an account")
	require.Equal(t, "true", b.eval(`String(document.querySelector('#account-bar').hidden)`), "no account yet")
	b.screenshot("register-captcha")

	b.do("type a wrong answer and press Create account",
		chromedp.SendKeys(chromedp.ID("login-captcha-answer"), "wrong"),
		chromedp.Click(chromedp.ID("register")))
	b.waitJS("a new picture", `window.__captchaIDs.length === 2`)
	require.Contains(t, b.message(), "captcha answer wasn’t right")
	login := ts.do(t, http.MethodPost, "/api/v1/sessions", "", map[string]any{"username": name, "password": password}, nil)
	require.Equal(t, http.StatusUnauthorized, login.status, "a wrong answer creates no account: %s", login.raw)

	id, err := strconv.Unquote(b.eval(`JSON.stringify(window.__captchaIDs[1])`))
	require.NoError(t, err)
	answer, err := rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err, "the page shows the captcha the gateway keeps")
	b.do("type the right answer and press Create account",
		chromedp.SendKeys(chromedp.ID("login-captcha-answer"), answer),
		chromedp.Click(chromedp.ID("register")))
	b.waitJS("registered and logged in", `!document.querySelector('#account-bar').hidden && document.querySelector('#whoami').textContent === `+strconv.Quote(name))
	require.Contains(t, b.message(), "Account created")
	require.Equal(t, "true", b.eval(`String(document.querySelector('#login-captcha').hidden)`), "the captcha is put away")
}
