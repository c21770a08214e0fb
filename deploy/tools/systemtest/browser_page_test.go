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

// The shopper page's language, its refusals at the card, and the order of
// its cards, in real Chromium (see browser_test.go). Each test runs one
// browser and signs its shopper in by the page's own session storage: the
// log-in form has its tests in browser_test.go.

// phone is the viewport of a common phone, in CSS pixels.
var phone = chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2))

// signIn keeps a token for a new shopper where the page keeps its session,
// and reloads: the page starts signed in, its socket live.
func (b *browser) signIn(ts *testSystem) {
	b.t.Helper()
	user := testUser()
	b.eval(fmt.Sprintf(`sessionStorage.setItem('seckill.session', JSON.stringify({token: %q, userId: %q, username: 'shopper', expiresAt: 0})) || 'ok'`,
		ts.shopper(b.t, user), strconv.FormatInt(user, 10)))
	b.do("reload", chromedp.Reload())
	b.waitJS("signed in, the socket live", `!document.querySelector('#account-bar').hidden && document.querySelector('#ws-state').dataset.state === 'live'`)
}

// cardOrder is the voucher ids of the cards, top to bottom.
func (b *browser) cardOrder() string {
	return b.eval(`[...document.querySelectorAll('#vouchers [data-voucher-id]')].map((c) => c.dataset.voucherId).join(',')`)
}

// inViewport is the JavaScript that says whether the element sel is wholly
// on screen.
func inViewport(sel string) string {
	return fmt.Sprintf(`(() => { const r = document.querySelector('%s').getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; })()`, sel)
}

// TestBrowserLanguage: a browser set to Chinese gets the page in Chinese
// (<html lang>, the static text, a card's words, prices in yuan and in yen
// by Intl, Accept-Language on the API requests); the switch turns it to
// English, which a reload keeps.
func TestBrowserLanguage(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	tea := newVoucher(t, ts, "Oolong tea", 5, 1)
	// Yen have no minor unit: price_cents 1999 is ¥1,999.
	ramen := newVoucher(t, ts, "Ramen set", 5, 1, func(b map[string]any) { b["currency"] = "JPY" })
	b := openPageWith(t, ts.base, "/", chromedp.Flag("lang", "zh-CN"), chromedp.Flag("accept-lang", "zh-CN"))
	require.True(t, strings.HasPrefix(b.eval(`navigator.languages[0]`), "zh"), "the browser speaks Chinese")
	b.waitJS("the tea's card", fmt.Sprintf(`document.querySelector('%s')?.dataset.state === 'live'`, card(tea)))

	require.Equal(t, "zh-CN", b.eval(`document.documentElement.lang`))
	require.Equal(t, "限时秒杀", b.eval(`document.title`))
	require.Equal(t, "登录后购买", b.eval(`document.querySelector('#auth-title').textContent`))
	require.Equal(t, "语言", b.eval(`document.querySelector('label[for=lang]').textContent`))
	require.Equal(t, "登录后购买", b.eval(fmt.Sprintf(`document.querySelector('%s .buy').textContent`, card(tea))))
	require.True(t, strings.HasPrefix(b.eval(fmt.Sprintf(`document.querySelector('%s .countdown').textContent`, card(tea))), "热卖中 · 距结束 "))
	require.Equal(t, "剩余 5 件 / 共 5 件", b.eval(fmt.Sprintf(`document.querySelector('%s .stock-figures').textContent`, card(tea))))
	price := b.eval(fmt.Sprintf(`document.querySelector('%s .price').textContent`, card(tea)))
	require.Equal(t, "¥19.99", price, "1999 fen in yuan, as Chinese writes it")
	require.Equal(t, b.eval(`new Intl.NumberFormat('zh-CN', {style: 'currency', currency: 'CNY'}).format(19.99)`), price)
	yen := b.eval(fmt.Sprintf(`document.querySelector('%s .price').textContent`, card(ramen)))
	require.Equal(t, b.eval(`new Intl.NumberFormat('zh-CN', {style: 'currency', currency: 'JPY'}).format(1999)`), yen)
	require.Contains(t, yen, "1,999", "whole yen")
	require.Equal(t, "zh-CN", b.eval(`[...new Set(window.__fetchLangs)].join()`), "every API request asks for Chinese")
	b.screenshot("zh-CN")

	b.do("switch to English with the keyboard", chromedp.Focus("#lang"), chromedp.KeyEvent(kb.ArrowUp))
	b.waitJS("the page in English", `document.documentElement.lang === 'en'`)
	require.Equal(t, "Log in to buy", b.eval(`document.querySelector('#auth-title').textContent`))
	require.Equal(t, "5 of 5 left", b.eval(fmt.Sprintf(`document.querySelector('%s .stock-figures').textContent`, card(tea))))
	require.Equal(t, b.eval(`new Intl.NumberFormat('en', {style: 'currency', currency: 'CNY'}).format(19.99)`),
		b.eval(fmt.Sprintf(`document.querySelector('%s .price').textContent`, card(tea))))
	require.Equal(t, b.eval(`new Intl.NumberFormat('en', {style: 'currency', currency: 'JPY'}).format(1999)`),
		b.eval(fmt.Sprintf(`document.querySelector('%s .price').textContent`, card(ramen))))
	require.Equal(t, "en", b.eval(`localStorage.getItem('seckill.lang')`))

	b.do("reload", chromedp.Reload())
	b.waitJS("the tea's card again", fmt.Sprintf(`document.querySelector('%s')?.dataset.state === 'live'`, card(tea)))
	require.Equal(t, "en", b.eval(`document.documentElement.lang`), "the choice outlives a reload")
	require.Equal(t, "Flash Sale", b.eval(`document.title`))
	require.Equal(t, "en", b.eval(`document.querySelector('#lang').value`))
	require.Equal(t, "en", b.eval(`[...new Set(window.__fetchLangs)].join()`))
	b.screenshot("en-after-reload")
}

// TestBrowserRefusalAtCard: on a phone, the third card's refusals show on
// that card, on screen: a wrong captcha says so there and hands the focus
// to the answer; a busy shop (503 with Retry-After) marks the card busy and
// counts down until Buy comes back.
func TestBrowserRefusalAtCard(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	// Newest first: the captcha voucher, made first, is the third card.
	vase := newVoucher(t, ts, "Celadon vase", 5, 1, func(b map[string]any) { b["captcha_required"] = true })
	newVoucher(t, ts, "Silk scarf", 5, 1)
	newVoucher(t, ts, "Jade bracelet", 5, 1)
	b := openPage(t, ts.base, "/")
	b.do("a phone's screen", phone)
	b.signIn(ts)
	b.waitJS("the vase's captcha", fmt.Sprintf(`window.__captchaIDs.length === 1 && !document.querySelector('%s .captcha').hidden`, card(vase)))
	require.Equal(t, vase, strings.Split(b.cardOrder(), ",")[2], "the vase is the third card")

	answerBox := "#captcha-" + vase
	notice := card(vase) + " .card-notice"
	b.do("a wrong answer, then Buy", chromedp.SendKeys(answerBox, "wrong"), chromedp.Click(card(vase)+" .buy"))
	b.waitJS("the card says the captcha was wrong", fmt.Sprintf(`document.querySelector('%s').textContent.includes('captcha answer')`, notice))
	require.Equal(t, "The captcha answer wasn’t right (or it expired). Here’s a new picture — please try again.", b.eval(`document.querySelector('`+notice+`').textContent`))
	require.Equal(t, "polite", b.eval(`document.querySelector('`+notice+`').getAttribute('aria-live')`))
	require.Equal(t, "true", b.eval(inViewport(notice)), "the card's word is on screen")
	require.Equal(t, "captcha-"+vase, b.eval(`document.activeElement.id`), "the emptied answer has the focus")
	require.Equal(t, "", b.eval(`document.activeElement.value`))
	b.waitJS("a new picture", `window.__captchaIDs.length === 2`)
	b.screenshot("wrong-captcha-at-card")

	// The operator shuts the door: every buy gets 503 with Retry-After. The
	// mode lives in Redis: open it again after.
	t.Cleanup(func() { ts.rdb.Del(context.Background(), edge.ModeKey) })
	require.Equal(t, http.StatusOK, ts.do(t, http.MethodPut, "/api/v1/admin/breaker", ts.cfg.AdminToken, map[string]any{"mode": "open"}, nil).status)
	rival := ts.shopper(t, testUser())
	require.Eventually(t, func() bool { return ts.buy(t, vase, rival, 1, "").status == http.StatusServiceUnavailable },
		5*time.Second, 100*time.Millisecond, "the breaker refuses buys")

	id, err := strconv.Unquote(b.eval(`JSON.stringify(window.__captchaIDs[1])`))
	require.NoError(t, err)
	answer := ts.rdb.Get(t.Context(), edge.CaptchaKeyPrefix+id).Val()
	require.NotEmpty(t, answer)
	// Watch the card every 20 ms: a Retry-After of one second is short.
	b.eval(fmt.Sprintf(`window.__seen = []; setInterval(() => {
	  const c = document.querySelector('%s'), btn = c.querySelector('.buy'), wait = c.querySelector('.card-retry');
	  window.__seen.push({disabled: btn.disabled, label: btn.textContent, wait: wait.hidden ? '' : wait.textContent, busy: c.dataset.notice || ''});
	}, 20) && 'ok'`, card(vase)))
	b.do("the right answer, then Buy", chromedp.SendKeys(answerBox, answer), chromedp.Click(card(vase)+" .buy"))
	b.waitJS("the card is busy and counts down", `window.__seen.some((s) => s.disabled && /^Wait \d+ s$/.test(s.label) && /^You can try again in \d+ s\.$/.test(s.wait) && s.busy === 'busy')`)
	require.Contains(t, b.eval(`document.querySelector('`+notice+`').textContent`), "The shop is very busy right now")
	require.Equal(t, "true", b.eval(inViewport(notice)), "the card's word is on screen")
	b.screenshot("busy-at-card")
	b.waitJS("Buy comes back after the countdown", fmt.Sprintf(
		`!document.querySelector('%s .buy').disabled && document.querySelector('%s').textContent === 'You can try again now.' && !document.querySelector('%s').dataset.notice`,
		card(vase), notice, card(vase)))
	require.Equal(t, "Buy", b.eval(fmt.Sprintf(`document.querySelector('%s .buy').textContent`, card(vase))))
	require.Equal(t, "0", b.eval(`document.querySelectorAll('[data-order-id]').length`), "nothing was bought")
	b.screenshot("busy-over")
}

// TestBrowserSaleOrder: live sales first, then upcoming, then sold out and
// ended, newest first in each group; a sale that opens or sells out moves
// to its group without a reload, and the card holding the focus stays where
// it is on screen while the others move.
func TestBrowserSaleOrder(t *testing.T) {
	// This test is serial (main_test.go): the page must be up before a sale that opens 5 s after it is made.
	ts := startSystem(t, nil)
	now := time.Now()
	window := func(begin, end time.Time) func(map[string]any) {
		return func(b map[string]any) {
			b["begin_at"] = begin.UTC().Format(time.RFC3339)
			b["end_at"] = end.UTC().Format(time.RFC3339)
		}
	}
	// Oldest first; each group lists its newest first.
	ended := newVoucher(t, ts, "Yesterday's dumplings", 5, 1, window(now.Add(-2*time.Hour), now.Add(-time.Hour)))
	soldOut := newVoucher(t, ts, "Last mooncake box", 1, 1)
	live1 := newVoucher(t, ts, "Green tea", 5, 1)
	live2 := newVoucher(t, ts, "Red bean bun", 1, 1)
	upcoming := newVoucher(t, ts, "Tomorrow's noodles", 5, 1, window(now.Add(5*time.Second), now.Add(time.Hour)))
	require.Equal(t, http.StatusAccepted, ts.buyRetrying(t, soldOut, ts.shopper(t, testUser()), 1, "sold-out").status)

	b := openPage(t, ts.base, "/")
	b.do("a phone's screen", phone)
	order := func(ids ...string) string { return strings.Join(ids, ",") }
	b.waitJS("live, upcoming, then over", fmt.Sprintf(`%q === [...document.querySelectorAll('#vouchers [data-voucher-id]')].map((c) => c.dataset.voucherId).join(',')`,
		order(live2, live1, upcoming, soldOut, ended)))
	require.Equal(t, "upcoming", b.eval(fmt.Sprintf(`document.querySelector('%s').dataset.state`, card(upcoming))), "the page was up before the sale opened")
	b.screenshot("ordered")

	b.waitJSFor("the sale that opens moves first", fmt.Sprintf(`%q === [...document.querySelectorAll('#vouchers [data-voucher-id]')].map((c) => c.dataset.voucherId).join(',')`,
		order(upcoming, live2, live1, soldOut, ended)), 15*time.Second)
	require.Equal(t, "live", b.eval(fmt.Sprintf(`document.querySelector('%s').dataset.state`, card(upcoming))))

	// The shopper is typing a quantity on the green tea when the bun sells out.
	qty := "#qty-" + live1
	b.eval(fmt.Sprintf(`document.querySelector('%s').scrollIntoView({block: 'center'}); document.querySelector('%s').focus({preventScroll: true}) || 'ok'`, card(live1), qty))
	topOf := func() float64 {
		f, err := strconv.ParseFloat(b.eval(fmt.Sprintf(`document.querySelector('%s').getBoundingClientRect().top`, card(live1))), 64)
		require.NoError(t, err)
		return f
	}
	top := topOf()
	require.Equal(t, http.StatusAccepted, ts.buyRetrying(t, live2, ts.shopper(t, testUser()), 1, "bun").status)
	b.waitJS("the sold-out sale moves to the end's group", fmt.Sprintf(`%q === [...document.querySelectorAll('#vouchers [data-voucher-id]')].map((c) => c.dataset.voucherId).join(',')`,
		order(upcoming, live1, live2, soldOut, ended)))
	require.Equal(t, "soldout", b.eval(fmt.Sprintf(`document.querySelector('%s').dataset.state`, card(live2))))
	require.Equal(t, "qty-"+live1, b.eval(`document.activeElement.id`), "the focus stays in the field")
	require.InDelta(t, top, topOf(), 1, "the focused card did not move on screen (within a pixel's rounding)")
	b.screenshot("resorted")
}
