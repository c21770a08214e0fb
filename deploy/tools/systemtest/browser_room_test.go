package systemtest

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserWaitingRoom: a shopper joins a voucher's waiting room behind
// others; the page shows the place, the people ahead, a progress bar and the
// estimated wait, moving as the line moves (pushed on the socket), then the
// Buy button at admission without a reload; the buy with the pass is an
// order. The operator page creates a voucher with a waiting room and shows
// the line's figures.
func TestBrowserWaitingRoom(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createRoomVoucher(t, 20, 1, 1, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	b := openBrowser(t, ts.base)
	c := card(vid)
	b.waitJS("the card shows the waiting room", fmt.Sprintf(`document.querySelector('%s .queue')?.hidden === false`, c))
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	// Five shoppers join before the page's: at one a second, the page sees
	// its place move a few times before its turn.
	for range 5 {
		j := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, testUser()), nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
	}
	b.waitJS("Join the line is offered, Buy is not", fmt.Sprintf(
		`document.querySelector('%s .join')?.hidden === false && !document.querySelector('%s .join').disabled && document.querySelector('%s .buy').hidden`, c, c, c))
	b.screenshot("room-before-join")
	b.do("join the line", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("the page shows its place", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'waiting'`, c))
	first, err := strconv.Atoi(b.eval(fmt.Sprintf(`document.querySelector('%s .queue-position').textContent`, c)))
	require.NoError(t, err)
	require.GreaterOrEqual(t, first, 2, "behind the others")
	require.Equal(t, strconv.Itoa(first-1), b.eval(fmt.Sprintf(`document.querySelector('%s .queue-ahead').textContent`, c)))
	require.Contains(t, b.eval(fmt.Sprintf(`document.querySelector('%s .queue-eta').textContent`, c)), ":")
	b.screenshot("room-in-line")

	b.waitJSFor("the place moves forward, pushed", fmt.Sprintf(
		`Number(document.querySelector('%s .queue-position').textContent) < %d &&
		 document.querySelector('%s .queue-bar').value > 0 &&
		 window.__wsFrames.some((f) => f.type === 'queue' && f.queue.state === 'waiting')`, c, first, c), 10*time.Second)
	b.screenshot("room-moved")

	b.waitJSFor("admitted: the Buy button shows", fmt.Sprintf(
		`document.querySelector('%s .queue').dataset.state === 'admitted' && !document.querySelector('%s .buy').hidden &&
		 !document.querySelector('%s .buy').disabled`, c, c, c), 15*time.Second)
	require.Equal(t, "loaded once", b.eval(`window.__loadMark`), "admitted without a reload")
	b.screenshot("room-admitted")
	order := b.buy(vid)
	b.waitStatus(order, "created", 30*time.Second)
	b.waitJS("the turn is used", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'used'`, c))
	b.screenshot("room-bought")

	// The operator page: the line's figures, and a new voucher with a room.
	op := openPage(t, ts.base, "/admin")
	op.waitJS("the operator page is shown", `document.querySelector('#admin-token') !== null`)
	op.do("enter the admin token",
		chromedp.SendKeys(chromedp.ID("admin-token"), ts.cfg.AdminToken),
		chromedp.Click(chromedp.ID("token-apply")),
	)
	row := fmt.Sprintf(`#stats tbody tr[data-voucher-id="%s"] td[data-field="queue"]`, vid)
	op.waitJS("the line's figures are shown", fmt.Sprintf(
		`/^\d+ waiting · [5-9]\d* admitted · \d+ expired · 1 used$/.test(document.querySelector('%s')?.textContent || '')`, row))
	const title = "Queue-guarded sneakers"
	op.eval(`document.querySelector('#v-room-rate').value = ''`)
	op.do("fill in a voucher with a waiting room",
		chromedp.SendKeys(chromedp.ID("v-title"), title),
		chromedp.SendKeys(chromedp.ID("v-price"), "120"),
		chromedp.Click(chromedp.ID("v-room")),
		chromedp.SendKeys(chromedp.ID("v-room-rate"), "250"),
		chromedp.Click(chromedp.ID("v-soon")),
		chromedp.Click(chromedp.ID("v-create")),
	)
	op.waitJS("the new voucher is listed with its line", fmt.Sprintf(`[...document.querySelectorAll('#stats tbody tr')].some((tr) =>
		tr.querySelector('[data-field="title"] .name').textContent === %q &&
		tr.querySelector('[data-field="title"] .sub').textContent.includes('line 250/s') &&
		tr.querySelector('[data-field="queue"]').textContent === '0 waiting · 0 admitted · 0 expired · 0 used')`, title))
	op.screenshot("operator-room")
	vs := ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil)
	var made map[string]any
	for _, v := range vs.list {
		if v["title"] == title {
			made = v
		}
	}
	require.NotNil(t, made)
	room, ok := made["waiting_room"].(map[string]any)
	require.True(t, ok, "the API has the room the page set: %v", made)
	require.EqualValues(t, 250, room["admit_per_second"])
	require.EqualValues(t, 300, room["prequeue_seconds"])
}

// TestBrowserRoomSoldOut: a shopper joins a waiting room whose only unit is
// held by someone else. The page keeps the place and says so ("sold out —
// you keep your place; units may come back"); when the holder cancels, the
// unit goes to the line and the page's shopper is admitted, pushed, and
// buys it.
func TestBrowserRoomSoldOut(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createRoomVoucher(t, 1, 1, 100, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	holder := ts.shopper(t, testUser())
	held := ts.buyWithPass(t, vid, holder, ts.admittedPass(t, vid, holder), "")
	require.Equal(t, http.StatusAccepted, held.status, "%s", held.raw)
	ts.waitCatalogStock(t, vid, 0)

	b := openBrowser(t, ts.base)
	c := card(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJS("a sold-out line can still be joined", fmt.Sprintf(
		`document.querySelector('%s .join')?.hidden === false && !document.querySelector('%s .join').disabled`, c, c))
	b.do("join the line", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("the page keeps the place, sold out", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'sold_out' &&
		document.querySelector('%s .queue-headline').textContent === 'Sold out — you keep your place; units may come back.' &&
		document.querySelector('%s .queue-position').textContent === '1' && document.querySelector('%s .buy').hidden`, c, c, c, c))
	b.screenshot("room-sold-out")

	order := held.body["order_id"].(string)
	ts.waitStatus(t, holder, order, "created")
	cancel := ts.do(t, http.MethodPost, "/api/v1/orders/"+order+"/cancel", holder, nil, nil)
	require.Equal(t, http.StatusOK, cancel.status, "%s", cancel.raw)
	b.waitJSFor("the unit back goes to the line: admitted, pushed", fmt.Sprintf(
		`document.querySelector('%s .queue').dataset.state === 'admitted' && !document.querySelector('%s .buy').hidden &&
		 !document.querySelector('%s .buy').disabled`, c, c, c), 15*time.Second)
	require.Equal(t, "loaded once", b.eval(`window.__loadMark`), "admitted without a reload")
	bought := b.buy(vid)
	b.waitStatus(bought, "created", 30*time.Second)
	b.screenshot("room-bought-returned")
}
