package systemtest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserDraw: the page of a voucher sold by draw offers "Enter the
// draw" in the entry window and shows the entry and the drand round the
// draw waits for once entered; when the draw is made (the voucher pushed
// with the round's signature) it shows the result
// without a reload, with the shopper's ticket and the cut-off, and the Buy
// button to a winner.
func TestBrowserDraw(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, drandEnv(t))
	begin := time.Now().Add(12 * time.Second)
	vid := ts.createDrawVoucher(t, 3, begin).body["id"].(string)
	b := openBrowser(t, ts.base)
	c := card(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJS("Enter the draw is offered, Buy is not", fmt.Sprintf(
		`document.querySelector('%s .join')?.hidden === false && document.querySelector('%s .join').textContent === 'Enter the draw' &&
		 !document.querySelector('%s .join').disabled && document.querySelector('%s .buy').hidden`, c, c, c, c))
	b.do("enter the draw", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("the page shows the entry and the round the draw waits for", fmt.Sprintf(
		`document.querySelector('%s .queue').dataset.state === 'entered' &&
		 document.querySelector('%s .queue-headline').textContent.includes('Your entry') &&
		 document.querySelector('%s .queue-headline').textContent.includes('drand round')`, c, c, c))
	b.screenshot("draw-entered")
	for range 2 {
		e := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, testUser()), nil, nil)
		require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
	}
	b.waitJSFor("won at the draw, without a reload: the Buy button shows", fmt.Sprintf(
		`document.querySelector('%s .queue').dataset.state === 'won' && !document.querySelector('%s .buy').hidden &&
		 document.querySelector('%s .queue-headline').textContent.includes('Your ticket')`, c, c, c), time.Until(begin)+20*time.Second)
	require.Equal(t, "loaded once", b.eval(`window.__loadMark`), "the result came without a reload")
	b.screenshot("draw-won")
	order := b.buy(vid)
	b.waitStatus(order, "created", 30*time.Second)
}

// TestBrowserOperatorDraw: an operator makes a voucher sold by draw, with
// adaptive admission, in the operator page; the voucher list says so; the
// draw's entries cannot be downloaded before the draw (the page says why),
// and once it is made they download as the CSV the API serves.
func TestBrowserOperatorDraw(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, drandEnv(t))
	b := openOperatorPage(t, ts)

	const title = "Operator-made draw"
	b.eval(`document.querySelector('#v-stock').value = ''; document.querySelector('#v-limit').value = ''`)
	b.do("fill in a voucher sold by draw, with adaptive admission",
		chromedp.SendKeys(chromedp.ID("v-title"), title),
		chromedp.SendKeys(chromedp.ID("v-price"), "3.00"),
		chromedp.SendKeys(chromedp.ID("v-stock"), "2"),
		chromedp.SendKeys(chromedp.ID("v-limit"), "1"),
		chromedp.Click(chromedp.ID("v-room")),
		chromedp.SetValue(chromedp.ID("v-room-mode"), "draw"),
	)
	// The select's change is what enables the winner's pass field.
	b.eval(`document.querySelector('#v-room-mode').dispatchEvent(new Event('change'))`)
	require.Equal(t, "false", b.eval(`String(document.querySelector('#v-room-draw-pass').disabled)`), "a draw asks for the winner's pass")
	require.Equal(t, "true", b.eval(`String(document.querySelector('#v-room-p99').disabled)`), "no adaptive bounds until asked for")
	b.do("ask for adaptive admission", chromedp.Click(chromedp.ID("v-room-adaptive")))
	require.Equal(t, "false", b.eval(`String(document.querySelector('#v-room-p99').disabled)`))
	// Opens in 15 s (the inputs take the browser's local time), entries
	// from the 60 s pre-queue before: time for the form and three entries
	// on a busy machine.
	b.eval(`(() => {
		const local = (ms) => new Date(ms - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 19);
		document.querySelector('#v-begin').value = local(Date.now() + 15000);
		document.querySelector('#v-end').value = local(Date.now() + 3600000);
		document.querySelector('#v-room-prequeue').value = '60';
	})()`)
	b.do("create it", chromedp.Click(chromedp.ID("v-create")))
	b.waitJS("the voucher list says it is sold by draw, adaptively", fmt.Sprintf(`[...document.querySelectorAll('#stats tbody tr')].some((tr) =>
		tr.querySelector('[data-field="title"] .name').textContent === %q &&
		tr.querySelector('[data-field="title"]').textContent.includes('draw, waitlist 100/s (adaptive 10–1000/s, p99 ≤ 250 ms)'))`, title))

	var vid string
	for _, v := range ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil).list {
		if v["title"] == title {
			vid = v["id"].(string)
			room := v["waiting_room"].(map[string]any)
			require.Equal(t, "draw", room["mode"])
			require.EqualValues(t, 600, room["draw_pass_seconds"])
			require.EqualValues(t, 60, room["prequeue_seconds"])
			require.Equal(t, map[string]any{"target_p99_ms": 250.0, "min_per_second": 10.0, "max_per_second": 1000.0}, room["adaptive"])
		}
	}
	require.NotEmpty(t, vid, "the voucher made in the page exists")
	draw := func() map[string]any {
		d, _ := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["draw"].(map[string]any)
		return d
	}
	require.Eventually(t, func() bool { d := draw(); return d != nil && d["beacon"] != nil },
		10*time.Second, 100*time.Millisecond, "the API agrees: a draw, committed to a beacon round")

	b.eval(`document.querySelector('#report-voucher').value = '` + vid + `'`)
	b.do("ask for the entries before the draw", chromedp.Click(chromedp.ID("report-draw-csv")))
	b.waitJS("the page says why there are none yet", fmt.Sprintf(`document.querySelector('#message').textContent.startsWith('No draw entries for voucher %s')`, vid))

	for range 3 {
		e := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, testUser()), nil, nil)
		require.Equal(t, http.StatusOK, e.status, "an entry: %s", e.raw)
	}
	require.Eventually(t, func() bool {
		d := draw()
		b, _ := d["beacon"].(map[string]any)
		return b != nil && b["signature"] != nil
	}, 30*time.Second, 100*time.Millisecond, "the draw is made once its round is out")

	// The file the page saves is read where the page hands it over.
	b.eval(`URL.createObjectURL = ((make) => (blob) => { blob.text().then((s) => { window.__saved = s; }); return make(blob); })(URL.createObjectURL)`)
	b.do("download the draw's entries", chromedp.Click(chromedp.ID("report-draw-csv")))
	b.waitJS("the page says the entries were downloaded", fmt.Sprintf(`document.querySelector('#message').textContent === 'Draw entries of voucher %s downloaded.' && window.__saved !== undefined`, vid))
	saved := b.eval(`window.__saved`)
	require.Equal(t, ts.rawGet(t, "/api/v1/admin/vouchers/"+vid+"/draw/entries", ts.cfg.AdminToken), saved, "the file is the API's export")
	rows := strings.Split(strings.TrimSpace(saved), "\n")
	require.Len(t, rows, 4, "the header and three entries")
	require.Equal(t, "user_id,ticket,result", rows[0])
	require.Equal(t, 2, strings.Count(saved, ",won\n"), "stock 2, limit 1: two winners")
	b.screenshot("operator-draw")
}
