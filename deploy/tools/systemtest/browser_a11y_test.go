package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// TestBrowserAccessibility: both pages pass axe-core's WCAG 2.2 AA rules
// (no serious or critical violation) in every state a shopper or an operator
// meets, each light and dark, on a phone and on a desktop, with a
// screenshot of each. The states are set up through the API and shown in
// one browser; where one screen shows several states at once, they are
// checked together (the test asserts each is on the screen). Every state
// of the shopper page is checked again in Chinese (in zhViews), switched
// with the page's own language select; a switch clears the page's
// messages, so a state made of one (an error, a busy answer) is made again
// in Chinese before the check. Screenshots of the shopper page are named
// with the language. Signed in, Tab goes around each page and every stop
// shows the focus.
//
//	shop-signed-out   signed out; cards on sale, sold out, paused, with a line, a draw open for entries
//	shop-error        a wrong password's error
//	shop-signed-in    signed in, in a line, a captcha shown, an order
//	shop-busy         a buy answered 503 (the operator forced the breaker open)
//	shop-draw         a draw won and draws lost (waitlisted)
//	admin-signed-out  the operator page with no token
//	admin-error       a wrong token's error
//	admin-signed-in   the figures of every voucher above, and a sale report
//	admin-busy        the breaker forced open
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	axeJS := axeSource(t)
	ts := startSystem(t, drandEnv(t))
	t.Cleanup(func() { ts.rdb.Del(context.Background(), edge.ModeKey) })
	name, password := newShopperName(), "correct horse battery"
	user := ts.register(t, name, password)

	plain := newVoucher(t, ts, "Desk lamp", 5, 2)
	sold := newVoucher(t, ts, "Last pair of sneakers", 1, 1)
	require.Equal(t, http.StatusAccepted, ts.buy(t, sold, ts.shopper(t, testUser()), 1, "").status)
	paused := newVoucher(t, ts, "Paused headphones", 5, 1)
	p := ts.do(t, http.MethodPut, "/api/v1/admin/vouchers/"+paused+"/state", ts.cfg.AdminToken, map[string]any{"state": "paused"}, nil)
	require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
	newVoucher(t, ts, "Signed first edition", 5, 1, func(b map[string]any) { b["captcha_required"] = true })
	// A line that moves one a second behind 60 others: the page's shopper
	// stays in it for the whole test.
	line := ts.createRoomVoucher(t, 100, 1, 1, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	for range 60 {
		j := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+line+"/queue", ts.shopper(t, testUser()), nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
	}
	// Draws made a few seconds from now: one the shopper alone enters (won),
	// three of one unit where drawOthers others enter too. The shopper wins
	// one with a chance of 1 in drawOthers+1 (every entry's ticket is as
	// likely to be the lowest), all three once in 27,000 runs.
	const drawOthers = 29
	begin := time.Now().Add(10 * time.Second)
	won := ts.createDrawVoucher(t, 1, begin).body["id"].(string)
	ts.enter(t, won, user)
	var lost []string
	for range 3 {
		l := ts.createDrawVoucher(t, 1, begin).body["id"].(string)
		ts.enter(t, l, user)
		for range drawOthers {
			ts.enter(t, l, ts.shopper(t, testUser()))
		}
		lost = append(lost, l)
	}
	ts.waitCatalogStock(t, sold, 0)

	var problems []string
	check := func(b *browser, state string, views ...a11yView) {
		problems = append(problems, b.checkA11y(state, axeJS, views...)...)
	}
	b := openBrowser(t, ts.base)
	// shop checks a state of the shopper page in English, then in Chinese:
	// shown says the state is on the screen (waited for in each language),
	// again makes anew what the switch cleared. The page is left in English.
	shop := func(state, shown string, again func()) {
		b.waitJS(state+" is shown", shown)
		check(b, state+"-en")
		b.setLang("zh-CN")
		if again != nil {
			again()
		}
		b.waitJS(state+" is shown in Chinese", shown)
		check(b, state+"-zh-CN", zhViews...)
		b.setLang("en")
	}

	b.waitCard(plain)
	shop("shop-signed-out", fmt.Sprintf(`document.querySelector('%s').dataset.state === 'soldout' &&
		document.querySelector('%s').dataset.state === 'paused' && !document.querySelector('%s .queue').hidden &&
		!document.querySelector('%s .queue').hidden`, card(sold), card(paused), card(line), card(won)), nil)

	wrongPassword := func() {
		b.eval(`document.querySelector('#password').value = ''`)
		b.do("log in with a wrong password", chromedp.SendKeys(chromedp.ID("password"), "wrong password"), chromedp.Click(chromedp.ID("login")))
	}
	b.do("type the username", chromedp.SendKeys(chromedp.ID("username"), name))
	wrongPassword()
	// The error of this attempt, in the page's language (the switch
	// emptied the status line).
	shop("shop-error", `(() => { const m = document.querySelector('#message');
		return m.dataset.kind === 'error' && (document.documentElement.lang === 'en' || /\p{Script=Han}/u.test(m.textContent)); })()`, wrongPassword)

	b.eval(`document.querySelector('#password').value = ''`)
	b.do("log in", chromedp.SendKeys(chromedp.ID("password"), password), chromedp.Click(chromedp.ID("login")))
	b.waitJS("logged in", `!document.querySelector('#account-bar').hidden`)
	b.waitJS("Join the line is offered", fmt.Sprintf(`!document.querySelector('%s .join').hidden && !document.querySelector('%s .join').disabled`, card(line), card(line)))
	// The element is pressed, not a point on the screen: the cards re-sort
	// when a sale's phase changes (the draws open meanwhile), and a click
	// at coordinates taken just before can land on another card.
	b.waitJS("in the line", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		if (c.querySelector('.queue').dataset.state === 'waiting') return true;
		const j = c.querySelector('.join'); if (!j.hidden && !j.disabled) j.click(); return false; })()`, card(line)))
	order := b.buy(plain)
	b.waitStatus(order, "created", 30*time.Second)
	shop("shop-signed-in", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'waiting' &&
		document.querySelector('[data-order-id="%s"]')?.dataset.status === 'created' &&
		[...document.querySelectorAll('.captcha-img')].some((i) => !i.hidden && i.complete && i.naturalWidth > 0)`, card(line), order), nil)
	require.Greater(t, b.tabAround(), 10, "every stop of the shopper page shows the focus")

	breaker := func(mode string) {
		a := ts.do(t, http.MethodPut, "/api/v1/admin/breaker", ts.cfg.AdminToken, map[string]any{"mode": mode}, nil)
		require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	}
	breaker("open")
	b.waitJS("Buy is back", fmt.Sprintf(`!document.querySelector('%s .buy').disabled`, card(plain)))
	// Every instance obeys within a second: press until the answer is 503,
	// which the card marks busy with a notice in the page's language. A
	// switch of language empties the notice; a busy card keeps its mark
	// until its wait is over, so only a new 503 shows both.
	busy := fmt.Sprintf(`(() => { const c = document.querySelector('%s'), n = c.querySelector('.card-notice');
		if (c.dataset.notice === 'busy' && n.dataset.kind === 'warn' && n.textContent !== '' &&
			(document.documentElement.lang === 'en' || /\p{Script=Han}/u.test(n.textContent))) return true;
		const x = c.querySelector('.buy'); if (!x.disabled && !c.dataset.notice) x.click(); return false; })()`, card(plain))
	pressUntilBusy := func() { b.waitJSFor("a buy is answered busy", busy, 10*time.Second) }
	pressUntilBusy()
	shop("shop-busy", busy, pressUntilBusy)
	breaker("auto")

	b.waitJSFor("a draw won", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'won'`, card(won)), time.Until(begin)+30*time.Second)
	lostJS := make([]string, len(lost))
	for i, l := range lost {
		lostJS[i] = fmt.Sprintf(`document.querySelector('%s .queue').dataset.state`, card(l))
	}
	b.waitJSFor("every draw made", fmt.Sprintf(`[%s].every((s) => s === 'won' || s === 'waitlisted')`, strings.Join(lostJS, ",")), 30*time.Second)
	require.Contains(t, b.eval(`[`+strings.Join(lostJS, ",")+`].join(' ')`), "waitlisted", "a draw lost (once in 27,000 runs the shopper wins all three)")
	shop("shop-draw", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'won' && [%s].includes('waitlisted')`, card(won), strings.Join(lostJS, ",")), nil)

	b.do("open the operator page", chromedp.Navigate(ts.base+"/admin"))
	b.waitJS("the operator page is shown", `document.querySelector('#admin-token') !== null && document.querySelector('#server-clock').textContent !== '--:--:--'`)
	check(b, "admin-signed-out")

	b.do("enter a wrong token", chromedp.SendKeys(chromedp.ID("admin-token"), "not-the-token"), chromedp.Click(chromedp.ID("token-apply")))
	b.waitJS("the error is shown", `document.querySelector('#message').dataset.kind === 'error'`)
	check(b, "admin-error")

	b.eval(`document.querySelector('#admin-token').value = ''`)
	b.do("enter the admin token", chromedp.SendKeys(chromedp.ID("admin-token"), ts.cfg.AdminToken), chromedp.Click(chromedp.ID("token-apply")))
	b.waitJS("every voucher's figures", `document.querySelectorAll('#stats tbody tr[data-voucher-id]').length === 9 &&
		document.querySelector('#breaker-mode').textContent === 'auto'`)
	b.do("show a sale report", chromedp.SendKeys(chromedp.ID("report-voucher"), plain), chromedp.Click(chromedp.ID("report-show")))
	b.waitJS("the report is shown", fmt.Sprintf(`document.querySelector('#report').dataset.voucherId === %q`, plain))
	check(b, "admin-signed-in")
	require.Greater(t, b.tabAround(), 20, "every stop of the operator page shows the focus")

	breaker("open")
	b.waitJS("the breaker shows open", `document.querySelector('#breaker-mode').textContent === 'open'`)
	check(b, "admin-busy")
	breaker("auto")

	require.Empty(t, problems, "axe-core's serious and critical WCAG 2.2 AA violations:\n%s", strings.Join(problems, "\n"))
}

// zhViews are the views a state of the shopper page is checked in again
// in Chinese: one of each scheme and each screen (light on a desktop, dark
// on a phone). All four cost the test about a third more time for little
// more: the Chinese page's colors and layout are its English page's.
var zhViews = []a11yView{a11yViews[0], a11yViews[3]}

// setLang switches the shopper page's language with its own select, as a
// shopper's choice does, and waits until the page speaks it.
func (b *browser) setLang(lang string) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`(() => { const s = document.querySelector('#lang'); s.value = %q;
		s.dispatchEvent(new Event('change', { bubbles: true })); return s.value; })()`, lang))
	b.waitJS("the page in "+lang, fmt.Sprintf(`document.documentElement.lang === %q && document.querySelector('#lang').value === %q`, lang, lang))
}

// register creates an account through the API and returns a token of its
// user, as a log-in would.
func (ts *testSystem) register(t *testing.T, username, password string) string {
	t.Helper()
	a := ts.do(t, http.MethodPost, "/api/v1/users", "", map[string]any{"username": username, "password": password}, nil)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	id, err := strconv.ParseInt(a.body["id"].(string), 10, 64)
	require.NoError(t, err)
	return ts.shopper(t, id)
}

// enter joins a voucher's line or draw as the token's shopper.
func (ts *testSystem) enter(t *testing.T, voucherID, token string) {
	t.Helper()
	e := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+voucherID+"/queue", token, nil, nil)
	require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
}

// logInByKeys tabs to the log-in form and signs in with typed keys only,
// then waits for the signed-in page.
func (b *browser) logInByKeys(name, password string) {
	b.t.Helper()
	b.tabTo("#username", false, 10)
	b.typeKeys(name)
	b.tabTo("#password", false, 1)
	b.typeKeys(password)
	b.press(kb.Enter, false)
	b.waitJS("logged in", `!document.querySelector('#account-bar').hidden && document.querySelector('#whoami').textContent === `+strconv.Quote(name))
	b.waitJS("the order socket is live", `document.querySelector('#ws-state').dataset.state === 'live'`)
}

// captchaAnswer is the answer the gateway keeps for the n-th captcha the
// page fetched (from 0).
func (b *browser) captchaAnswer(ts *testSystem, n int) string {
	b.t.Helper()
	id, err := strconv.Unquote(b.eval(fmt.Sprintf(`JSON.stringify(window.__captchaIDs[%d])`, n)))
	require.NoError(b.t, err)
	answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(b.t, err, "the page shows the captcha the gateway keeps")
	return answer
}

// TestBrowserKeyboardBuy: a shopper with a keyboard alone (Tab, Shift-Tab,
// Enter, Space and typed characters; no click, no script run in the page)
// logs in, types a voucher's captcha, buys it and pays for it, and every
// press leaves the focus visible.
func TestBrowserKeyboardBuy(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := newVoucher(t, ts, "Signed first edition", 5, 1, func(b map[string]any) { b["captcha_required"] = true })
	name, password := newShopperName(), "correct horse battery"
	ts.register(t, name, password)
	b := openBrowser(t, ts.base)
	b.waitCard(vid)

	b.logInByKeys(name, password)
	require.Equal(t, "vouchers-title", b.eval(`document.activeElement.id`), "the form hid: the focus goes on from the sale")
	require.Equal(t, "ok", b.eval(focusShown))
	b.waitJS("the captcha picture", fmt.Sprintf(`window.__captchaIDs.length === 1 && !document.querySelector('%s .captcha-img').hidden`, card(vid)))
	buy := card(vid) + " .buy"
	b.tabTo(buy, false, 30)
	b.tabTo("#captcha-"+vid, true, 5)
	b.typeKeys(b.captchaAnswer(ts, 0))
	b.tabTo(buy, false, 3)
	b.press(" ", false)
	b.waitJS("the new order is listed", `document.querySelectorAll('[data-order-id]').length === 1`)
	order := b.eval(`document.querySelector('#orders [data-order-id]').dataset.orderId`)
	b.waitStatus(order, "created", 30*time.Second)

	b.tabTo(fmt.Sprintf(`[data-order-id="%s"] .pay`, order), true, 20)
	b.press(kb.Enter, false)
	b.waitStatus(order, "paid", 30*time.Second)
	b.screenshot("keyboard-paid")
}

// TestBrowserBlindShopper: the path of a shopper who cannot see the
// screen. Beside the captcha's picture, "Listen instead" is reached by
// keyboard and named; pressed, it plays the captcha read aloud in a named
// player and puts the focus in the answer box, labelled "Digits you hear".
// The digits typed and Enter buy, and the page's polite live regions
// announce the order reserved, then confirmed. A proof-of-work voucher's
// check has a polite live region in the accessibility tree while idle, so
// its progress is heard when it comes.
func TestBrowserBlindShopper(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	pow := newVoucher(t, ts, "Limited sneakers", 5, 1, func(b map[string]any) { b["challenge"] = "pow" })
	vid := newVoucher(t, ts, "Concert tickets", 5, 1, func(b map[string]any) { b["challenge"] = "captcha" })
	name, password := newShopperName(), "correct horse battery"
	ts.register(t, name, password)
	b := openBrowser(t, ts.base)
	b.waitCard(vid)
	require.Equal(t, "status polite", b.eval(`(() => { const m = document.querySelector('#message');
		return m.getAttribute('role') + ' ' + m.getAttribute('aria-live'); })()`), "the status line is a polite live region")

	b.logInByKeys(name, password)
	b.waitJS("the captcha picture", fmt.Sprintf(`window.__captchaIDs.length === 1 && !document.querySelector('%s .captcha-img').hidden`, card(vid)))
	listen := card(vid) + " .captcha-listen"
	b.tabTo(listen, false, 40)
	require.Equal(t, "Listen instead", b.eval(`document.activeElement.textContent`))
	require.Equal(t, "true", b.eval(fmt.Sprintf(`document.querySelector('%s').parentElement.contains(document.querySelector('%s .captcha-img'))`, listen, card(vid))),
		"the audio captcha is offered beside the picture")
	b.press(kb.Enter, false)
	b.waitJS("the captcha read aloud, the focus in its answer", fmt.Sprintf(`window.__captchaIDs.length === 2 &&
		!document.querySelector('%s .captcha-audio').hidden && document.activeElement.id === 'captcha-%s'`, card(vid), vid))
	require.True(t, strings.HasPrefix(b.eval(fmt.Sprintf(`document.querySelector('%s .captcha-audio').src`, card(vid))), "data:audio/wav;base64,"))
	require.NotEmpty(t, b.eval(fmt.Sprintf(`document.querySelector('%s .captcha-audio').getAttribute('aria-label')`, card(vid))), "the player is named")
	require.Equal(t, "Digits you hear", b.eval(`document.activeElement.labels[0].textContent`), "the answer box is labelled")
	require.Equal(t, "ok", b.eval(focusShown))

	// What the page's live regions say, in order, as a screen reader hears
	// it: each change inside a region is the region's whole text.
	b.eval(`(() => { window.__said = [];
		new MutationObserver((records) => { for (const r of records) {
			const node = r.target.nodeType === Node.ELEMENT_NODE ? r.target : r.target.parentElement;
			const region = node && node.closest('[aria-live]');
			if (region && region.textContent && window.__said[window.__said.length - 1] !== region.textContent) window.__said.push(region.textContent);
		} }).observe(document.body, { childList: true, characterData: true, subtree: true }); })()`)
	b.typeKeys(b.captchaAnswer(ts, 1))
	b.press(kb.Enter, false)
	b.waitJS("the new order is listed", `document.querySelectorAll('[data-order-id]').length === 1`)
	order := b.eval(`document.querySelector('#orders [data-order-id]').dataset.orderId`)
	b.waitStatus(order, "created", 30*time.Second)
	ref := order[len(order)-6:]
	b.waitJS("the order's progress is announced", fmt.Sprintf(`(() => {
		const r = window.__said.findIndex((s) => s.includes('%s') && s.includes('is reserved'));
		const c = window.__said.findIndex((s) => s.includes('%s') && s.includes('is confirmed'));
		return r >= 0 && c > r; })()`, ref, ref))

	status := card(pow) + " .pow-status"
	require.Equal(t, "status polite", b.eval(fmt.Sprintf(`(() => { const s = document.querySelector('%s');
		return s.getAttribute('role') + ' ' + s.getAttribute('aria-live'); })()`, status)))
	require.Equal(t, "in the tree", b.eval(fmt.Sprintf(`(() => { const s = document.querySelector('%s');
		return s.hidden || getComputedStyle(s).display === 'none' || getComputedStyle(s).visibility === 'hidden' ? 'left out' : 'in the tree'; })()`, status)),
		"the device check's live region is there before it speaks")
	b.screenshot("blind-bought")
}
