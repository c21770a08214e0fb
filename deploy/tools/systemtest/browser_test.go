package systemtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The shopper page in real headless Chromium (Debian's chromium, installed by
// `make deps`), driven over the DevTools protocol: what a shopper does, and
// what the page shows, with a screenshot of every step. A JavaScript error
// logged by the page fails the test.
//
// Screenshots go under the test's temporary folder (their paths are logged);
// set SECKILL_SCREENSHOTS to a folder to keep a copy after the test.

// chromiumPath finds Debian's chromium. A missing browser is a failure, not
// a skip: the page is only known to work once a real browser ran it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatal("chromium is not installed: the browser tests need Debian's chromium (apt-get install chromium, or make deps)")
	return ""
}

// frameRecorder runs before the page's own scripts: it keeps every message
// the page's WebSockets receive in window.__wsFrames, so the test can tell a
// status that came pushed on the socket from one the page read over REST,
// the id of every captcha the page fetched in window.__captchaIDs, so
// the test can look its answer up where the gateway keeps it, and the
// Accept-Language of every API request in window.__fetchLangs.
const frameRecorder = `(() => {
  window.__wsFrames = [];
  window.__captchaIDs = [];
  window.__fetchLangs = [];
  const nativeFetch = window.fetch;
  window.fetch = async (...args) => {
    window.__fetchLangs.push(new Headers(args[1] && args[1].headers).get('Accept-Language') || '');
    const res = await nativeFetch(...args);
    if (/\/captcha(\?kind=audio)?$/.test(String(args[0])) && res.ok) {
      res.clone().json().then((b) => window.__captchaIDs.push(b.captcha_id), () => {});
    }
    return res;
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (ev) => {
        try { window.__wsFrames.push(JSON.parse(ev.data)); } catch (e) { window.__wsFrames.push({ type: 'unparsable' }); }
      });
    }
  };
})();`

// browser is one Chromium with one tab on the shop.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string
	dir   string
	keep  string
	shots int

	mu       sync.Mutex
	jsErrors []string
}

// openBrowser starts Chromium with a fresh profile and opens the shop's
// page. It fails the test at the end if the page logged a JavaScript error.
func openBrowser(t *testing.T, base string) *browser {
	t.Helper()
	b := openPage(t, base, "/")
	// A reload would lose this mark: statuses must change without one.
	b.eval(`window.__loadMark = 'loaded once'`)
	b.waitJS("the page shows the log-in form", `!document.querySelector('#auth').hidden`)
	return b
}

// openPage starts Chromium with a fresh profile and opens one page of the
// site. It fails the test at the end if the page logged a JavaScript error.
func openPage(t *testing.T, base, path string) *browser {
	t.Helper()
	return openPageWith(t, base, path)
}

// openPageWith is openPage with more flags for Chromium (a language, a
// window size...).
func openPageWith(t *testing.T, base, path string, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		// The flags a headless test browser wants (headless, no-first-run and
		// disable-background-networking are in the defaults).
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 1000),
	)
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
	})
	b := &browser{t: t, ctx: ctx, base: base, dir: t.TempDir(), keep: os.Getenv("SECKILL_SCREENSHOTS")}

	// Start the browser with no deadline (a deadline on the first Run would
	// bind the browser's life to it), then listen before the page loads.
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Chromium logs every 4xx answer as a network error: those are
			// the API's answers, which the page turns into sentences.
			if (m.Type == chromedp.ConsoleError || m.IsException()) && m.Source != "network" {
				b.mu.Lock()
				b.jsErrors = append(b.jsErrors, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(b.checkNoJSErrors)

	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: frameRecorder})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.timeout(30*time.Second), chromedp.Navigate(base+path)))
	return b
}

func (b *browser) checkNoJSErrors() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.jsErrors) > 0 {
		b.t.Errorf("the page logged JavaScript errors:\n%s", strings.Join(b.jsErrors, "\n"))
	}
}

// timeout bounds one action without binding the browser to it.
func (b *browser) timeout(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	b.t.Cleanup(cancel)
	return ctx
}

// do runs actions, failing with a screenshot.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.timeout(30*time.Second), actions...); err != nil {
		b.fail(what, err)
	}
}

// eval runs JavaScript in the page and returns its string value.
func (b *browser) eval(js string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.timeout(10*time.Second), chromedp.Evaluate[any](js))
	if err != nil {
		b.fail("evaluate "+js, err)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// waitJS waits until the expression is truthy.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	b.waitJSFor(what, expr, 30*time.Second)
}

func (b *browser) waitJSFor(what, expr string, d time.Duration) {
	b.t.Helper()
	_, err := chromedp.Run(b.timeout(d+5*time.Second), chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		b.fail(what, err)
	}
}

// message is the page's status line.
func (b *browser) message() string {
	return b.eval(`document.querySelector('#message').textContent`)
}

// fail stops the test with what the page says and a screenshot.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	msg, _ := chromedp.Run(b.timeout(5*time.Second), chromedp.Evaluate[string](`document.querySelector('#message')?.textContent || ''`))
	path := b.screenshot("FAILED-" + strings.ReplaceAll(what, " ", "-"))
	b.t.Fatalf("%s: %v\nthe page's message: %q\nscreenshot: %s", what, err, msg, path)
}

// openOperatorPage opens the operator page and enters the admin token,
// returning once the page has used it (the breaker's mode is shown).
func openOperatorPage(t *testing.T, ts *testSystem) *browser {
	t.Helper()
	b := openPage(t, ts.base, "/admin")
	b.waitJS("the operator page is shown", `document.querySelector('#admin-token') !== null`)
	b.do("enter the admin token",
		chromedp.SendKeys(chromedp.ID("admin-token"), ts.cfg.AdminToken),
		chromedp.Click(chromedp.ID("token-apply")),
	)
	b.waitJS("the breaker's mode is shown", `document.querySelector('#breaker-mode').textContent === 'auto'`)
	return b
}

// screenshot saves the whole page as NN-name.png and logs where.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.timeout(15*time.Second), chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.shots++
	file := fmt.Sprintf("%02d-%s.png", b.shots, name)
	path := filepath.Join(b.dir, file)
	require.NoError(b.t, os.WriteFile(path, png, 0o644))
	b.t.Logf("screenshot: %s", path)
	if b.keep != "" {
		require.NoError(b.t, os.MkdirAll(b.keep, 0o755))
		require.NoError(b.t, os.WriteFile(filepath.Join(b.keep, b.t.Name()[strings.LastIndex(b.t.Name(), "/")+1:]+"-"+file), png, 0o644))
	}
	return path
}

// register creates an account through the page, which logs in right after,
// then logs out and in again with the form.
func (b *browser) registerAndLogIn(username, password string) {
	b.t.Helper()
	b.do("fill in the account",
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("register")),
	)
	b.waitJS("registered and logged in", `!document.querySelector('#account-bar').hidden`)
	require.Contains(b.t, b.message(), "Account created")
	b.do("log out", chromedp.Click(chromedp.ID("logout")))
	b.waitJS("logged out", `!document.querySelector('#auth').hidden`)
	b.eval(`document.querySelector('#username').value = ''`) // the page keeps the last name typed
	b.do("log in",
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login")),
	)
	b.waitJS("logged in", `!document.querySelector('#account-bar').hidden && document.querySelector('#whoami').textContent === `+strconv.Quote(username))
	require.Contains(b.t, b.message(), "Welcome back")
	b.waitJS("the order socket is live", `document.querySelector('#ws-state').dataset.state === 'live'`)
}

// card is the CSS selector of a voucher's card.
func card(voucherID string) string { return fmt.Sprintf(`[data-voucher-id="%s"]`, voucherID) }

// orderEl is the JavaScript of an order's element.
func orderEl(orderID string) string {
	return fmt.Sprintf(`document.querySelector('[data-order-id="%s"]')`, orderID)
}

// waitCard waits for a voucher's card, live and with stock.
func (b *browser) waitCard(voucherID string) {
	b.t.Helper()
	b.waitJS("the voucher's card is on sale", fmt.Sprintf(
		`document.querySelector('%s')?.dataset.state === 'live' && !document.querySelector('%s .buy').disabled`, card(voucherID), card(voucherID)))
}

// buy presses the card's Buy button and returns the order the page shows.
func (b *browser) buy(voucherID string) string {
	b.t.Helper()
	before := b.eval(`document.querySelectorAll('[data-order-id]').length`)
	b.do("press Buy", chromedp.Click(chromedp.CSS(card(voucherID)+" .buy")))
	b.waitJS("the new order is listed", `document.querySelectorAll('[data-order-id]').length > `+before)
	return b.eval(`document.querySelector('#orders [data-order-id]').dataset.orderId`)
}

// waitStatus waits until the page shows the order with status, and checks
// that the status came pushed on the socket.
func (b *browser) waitStatus(orderID, status string, d time.Duration) {
	b.t.Helper()
	b.waitJSFor("the order shows "+status, fmt.Sprintf(`%s?.dataset.status === %q && %s.querySelector('.status').textContent === %q`,
		orderEl(orderID), status, orderEl(orderID), status), d)
	b.waitJS(status+" came pushed on the socket", fmt.Sprintf(
		`window.__wsFrames.some((f) => f.type === 'order' && f.order.order_id === %q && f.order.status === %q)`, orderID, status))
	require.Equal(b.t, "loaded once", b.eval(`window.__loadMark`), "the page must not reload")
}

// newVoucher puts a voucher on sale through the admin API; more may set
// other fields of the request (captcha_required, ...).
func newVoucher(t *testing.T, ts *testSystem, title string, stock, limit int, more ...func(map[string]any)) string {
	t.Helper()
	body := map[string]any{
		"title": title, "kind": "seckill", "price_cents": 1999, "stock": stock, "per_user_limit": limit,
		"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		"end_at":   time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339),
	}
	for _, m := range more {
		m(body)
	}
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, body, nil)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	return a.body["id"].(string)
}

func newShopperName() string { return "shopper_" + strconv.FormatInt(rand.Int64N(1<<40), 36) }

// TestBrowserBuyPayAndSoldOut: register, log in, buy, see created arrive
// without a reload, pay, see paid; then the sold-out message.
func TestBrowserBuyPayAndSoldOut(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	concert := newVoucher(t, ts, "Front-row concert ticket", 5, 1)
	b := openBrowser(t, ts.base)
	b.waitCard(concert)
	b.screenshot("shop")

	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.screenshot("logged-in")

	id := b.buy(concert)
	b.waitStatus(id, "created", 30*time.Second)
	b.waitJS("a pay button and the time left to pay", fmt.Sprintf(
		`!%s.querySelector('.pay').hidden && %s.querySelector('.deadline').textContent.startsWith('Pay within')`, orderEl(id), orderEl(id)))
	b.screenshot("created")

	b.do("press Pay", chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-order-id="%s"] .pay`, id))))
	b.waitStatus(id, "paid", 30*time.Second)
	b.screenshot("paid")
	token := b.eval(`JSON.parse(sessionStorage.getItem('seckill.session')).token`)
	rest := ts.do(t, http.MethodGet, "/api/v1/orders/"+id, token, nil, nil)
	require.Equal(t, "paid", rest.body["status"], "the page and the API agree")

	// Sold out: another shopper takes the last pair while the page still
	// shows it. The page refreshes the stock every 2 s, so the Buy button
	// is pressed at once; when a refresh won the race, try a new voucher.
	rival := ts.shopper(t, testUser())
	clicked := false
	var sneakers string
	for attempt := 0; attempt < 3 && !clicked; attempt++ {
		sneakers = newVoucher(t, ts, "Last pair of sneakers", 1, 1)
		b.waitCard(sneakers)
		require.Equal(t, http.StatusAccepted, ts.buy(t, sneakers, rival, 1, "").status)
		clicked = b.eval(fmt.Sprintf(`(() => { const x = document.querySelector('%s .buy'); if (x.disabled) return false; x.click(); return true; })()`, card(sneakers))) == "true"
	}
	require.True(t, clicked, "the page learnt of the sale before the click three times")
	b.waitJS("the sold-out message", `document.querySelector('#message').textContent.includes('sold out')`)
	require.Equal(t, "Sorry — this voucher is sold out.", b.message())
	b.waitJS("the Buy button greys out", fmt.Sprintf(
		`document.querySelector('%s .buy').disabled && document.querySelector('%s').dataset.state === 'soldout'`, card(sneakers), card(sneakers)))
	b.screenshot("sold-out")
}

// TestBrowserTimeoutAndRateLimit: with a payment timeout of seconds, the
// unpaid order turns cancelled on screen; with one buy per second per
// shopper, a second buy shows the rate-limited message, and the page
// retries by itself once Retry-After has passed.
func TestBrowserTimeoutAndRateLimit(t *testing.T) {
	// This test is serial (main_test.go): the page's click must come before the 1/s limit refills.
	ts := startSystem(t, map[string]string{
		"SECKILL_PAY_TIMEOUT": "4s",
		"SECKILL_USER_RATE":   "1",
		"SECKILL_USER_BURST":  "1",
	})
	flowers := newVoucher(t, ts, "Spring flower bouquet", 5, 1)
	b := openBrowser(t, ts.base)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitCard(flowers)

	id := b.buy(flowers)
	b.waitStatus(id, "created", 30*time.Second)
	b.screenshot("created-unpaid")
	b.waitStatus(id, "cancelled", 30*time.Second)
	b.waitJS("the cancellation is announced", `document.querySelector('#message').textContent.includes('was cancelled')`)
	b.screenshot("cancelled")

	// Rate limit: the shopper's one buy per second is spent (another tab),
	// then the page's Buy is answered 429.
	books := newVoucher(t, ts, "Signed first edition", 10, 2)
	b.waitCard(books)
	token := b.eval(`JSON.parse(sessionStorage.getItem('seckill.session')).token`)
	first := ts.buy(t, books, token, 1, "")
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
	b.do("press Buy again", chromedp.Click(chromedp.CSS(card(books)+" .buy")))
	b.waitJSFor("the rate-limited message", `document.querySelector('#message').textContent.startsWith('Too many tries')`, 10*time.Second)
	b.screenshot("rate-limited")
	// The page waits out Retry-After and buys with the same key.
	b.waitJS("the retried buy got its order", fmt.Sprintf(
		`[...document.querySelectorAll('[data-order-id]')].filter((o) => o.dataset.orderId !== %q && o.dataset.orderId !== %q).length === 1`,
		id, first.body["order_id"].(string)))
	b.screenshot("retried")
}

// TestBrowserLiveStockAndPause: a visitor who is not logged in sees the
// stock move and an operator's pause come and go, pushed on the socket,
// without a reload and without the page polling the catalog.
func TestBrowserLiveStockAndPause(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	lamps := newVoucher(t, ts, "Desk lamp", 5, 3)
	b := openBrowser(t, ts.base)
	b.waitCard(lamps)
	b.waitJS("the socket is live without a log-in", `document.querySelector('#ws-state').dataset.state === 'live'`)
	b.waitJS("the voucher came on the public socket", fmt.Sprintf(
		`window.__wsFrames.some((f) => f.type === 'voucher' && f.voucher.id === %q)`, lamps))
	catalogReads := `performance.getEntriesByType('resource').filter((e) => /\/api\/v1\/vouchers(\?|$)/.test(e.name)).length`
	before := b.eval(catalogReads)

	// Another shopper buys two: the page shows 3 left, pushed.
	rival := ts.shopper(t, testUser())
	require.Equal(t, http.StatusAccepted, ts.buy(t, lamps, rival, 2, "").status)
	b.waitJSFor("the stock moves live", fmt.Sprintf(`document.querySelector('%s .stock-left').textContent === '3'`, card(lamps)), 5*time.Second)
	b.waitJS("the stock came pushed", fmt.Sprintf(
		`window.__wsFrames.some((f) => f.type === 'voucher' && f.voucher.id === %q && f.voucher.stock_left === 3)`, lamps))
	b.screenshot("live-stock")

	// The operator pauses the voucher: the card says so, its button is off.
	paused := ts.do(t, http.MethodPut, "/api/v1/admin/vouchers/"+lamps+"/state", ts.cfg.AdminToken, map[string]any{"state": "paused"}, nil)
	require.Equal(t, http.StatusOK, paused.status, "%s", paused.raw)
	require.Equal(t, "paused", paused.body["state"])
	b.waitJSFor("the pause shows live", fmt.Sprintf(
		`document.querySelector('%s').dataset.state === 'paused' && document.querySelector('%s .buy').disabled &&
		 document.querySelector('%s .countdown').textContent.startsWith('Paused')`, card(lamps), card(lamps), card(lamps)), 5*time.Second)
	b.screenshot("paused")
	refused := ts.buy(t, lamps, rival, 1, "")
	require.Equal(t, http.StatusServiceUnavailable, refused.status, "%s", refused.raw)
	require.NotEmpty(t, refused.header.Get("Retry-After"))

	resumed := ts.do(t, http.MethodPut, "/api/v1/admin/vouchers/"+lamps+"/state", ts.cfg.AdminToken, map[string]any{"state": "on_sale"}, nil)
	require.Equal(t, http.StatusOK, resumed.status, "%s", resumed.raw)
	b.waitJSFor("the end of the pause shows live", fmt.Sprintf(
		`document.querySelector('%s').dataset.state === 'live' && !document.querySelector('%s .buy').disabled`, card(lamps), card(lamps)), 5*time.Second)
	require.Equal(t, before, b.eval(catalogReads), "the page followed the socket and did not poll the catalog")
	require.Equal(t, "loaded once", b.eval(`window.__loadMark`), "the page must not reload")
	b.screenshot("resumed")
}
