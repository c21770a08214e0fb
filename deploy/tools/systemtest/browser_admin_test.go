package systemtest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// TestBrowserOperatorPage: an operator enters the admin token, creates a
// voucher, sees its stats, adds stock to the running sale, and shuts the
// sale's door for the fleet, all in the page; the token is never stored by
// the browser.
func TestBrowserOperatorPage(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	t.Cleanup(func() { ts.rdb.Del(context.Background(), edge.ModeKey) })
	b := openOperatorPage(t, ts)
	b.screenshot("operator-token")

	const title = "Operator-made lantern"
	b.eval(`document.querySelector('#v-stock').value = ''; document.querySelector('#v-limit').value = ''`)
	b.do("fill in a voucher",
		chromedp.SendKeys(chromedp.ID("v-title"), title),
		chromedp.SendKeys(chromedp.ID("v-price"), "4.50"),
		chromedp.SendKeys(chromedp.ID("v-stock"), "7"),
		chromedp.SendKeys(chromedp.ID("v-limit"), "2"),
		chromedp.Click(chromedp.ID("v-soon")),
		chromedp.Click(chromedp.ID("v-pow")),
		chromedp.Click(chromedp.ID("v-create")),
	)
	b.waitJS("the new voucher's stats are listed", fmt.Sprintf(`[...document.querySelectorAll('#stats tbody tr')].some((tr) =>
		tr.querySelector('[data-field="title"] .name').textContent === %q &&
		tr.querySelector('[data-field="stock_total"]').textContent === '7' &&
		tr.querySelector('[data-field="created"]').textContent === '0')`, title))
	b.screenshot("operator-voucher")

	// The API agrees with what the page made.
	vs := ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil)
	var made map[string]any
	for _, v := range vs.list {
		if v["title"] == title {
			made = v
		}
	}
	require.NotNil(t, made, "the voucher made in the page exists")
	require.EqualValues(t, 450, made["price_cents"])
	require.EqualValues(t, 2, made["per_user_limit"])
	require.Equal(t, "pow", made["challenge"], "the device check asked for")

	// Pause this one voucher from its row, then resume it.
	id := made["id"].(string)
	pauseButton := fmt.Sprintf(`#stats tbody tr[data-voucher-id="%s"] td[data-field="pause"] button`, id)
	saleCell := fmt.Sprintf(`document.querySelector('#stats tbody tr[data-voucher-id="%s"] td[data-field="sale"]').textContent`, id)
	b.waitJS("the row has a Pause button", fmt.Sprintf(`document.querySelector('%s')?.textContent === 'Pause'`, pauseButton))
	b.do("pause the voucher", chromedp.Click(chromedp.CSS(pauseButton)))
	b.waitJS("the row shows it paused", saleCell+` === 'paused' && document.querySelector('`+pauseButton+`').textContent === 'Resume'`)
	one := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+id, "", nil, nil)
	require.Equal(t, "paused", one.body["state"], "the API agrees with the page")
	b.screenshot("operator-paused")
	b.do("resume the voucher", chromedp.Click(chromedp.CSS(pauseButton)))
	b.waitJS("the row shows it back", saleCell+` !== 'paused' && document.querySelector('`+pauseButton+`').textContent === 'Pause'`)
	one = ts.do(t, http.MethodGet, "/api/v1/vouchers/"+id, "", nil, nil)
	require.NotEqual(t, "paused", one.body["state"])

	b.do("shut the sale's door", chromedp.Click(chromedp.ID("breaker-open")), chromedp.Click(chromedp.ID("breaker-apply")))
	b.waitJS("the page shows the door shut", `document.querySelector('#breaker-mode').textContent === 'open'`)
	mode := ts.do(t, http.MethodGet, "/api/v1/admin/breaker", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, "open", mode.body["mode"])
	b.screenshot("operator-breaker-open")
	b.do("open the door again", chromedp.Click(chromedp.ID("breaker-auto")), chromedp.Click(chromedp.ID("breaker-apply")))
	b.waitJS("the page shows auto", `document.querySelector('#breaker-mode').textContent === 'auto'`)

	// Steer the running sale: add stock; the row and the list of changes
	// show it, with the operator's name as the server logs it (root:
	// SECKILL_ADMIN_TOKEN).
	b.do("add stock to the running sale",
		chromedp.SendKeys(chromedp.ID("s-voucher"), id),
		chromedp.SendKeys(chromedp.ID("s-add-stock"), "5"),
		chromedp.Click(chromedp.ID("s-apply")),
	)
	b.waitJS("the change is listed", fmt.Sprintf(`[...document.querySelectorAll('#changes li[data-voucher-id="%s"]')].some((li) =>
		li.textContent.includes('+5 stock (total 12)') && /by root$/.test(li.textContent))`, id))
	b.waitJS("the row shows the new total", fmt.Sprintf(
		`document.querySelector('#stats tbody tr[data-voucher-id="%s"] td[data-field="stock_total"]').textContent === '12'`, id))
	one = ts.do(t, http.MethodGet, "/api/v1/vouchers/"+id, "", nil, nil)
	require.EqualValues(t, 12, one.body["stock_total"], "the API agrees with the page")
	// A change made elsewhere (a script, another operator) is listed too,
	// from the record, with who made it.
	end, err := time.Parse(time.RFC3339, one.body["end_at"].(string))
	require.NoError(t, err)
	later := ts.do(t, http.MethodPatch, "/api/v1/admin/vouchers/"+id, ts.cfg.AdminToken,
		map[string]any{"end_at": end.Add(time.Hour).UTC().Format(time.RFC3339)}, nil)
	require.Equal(t, http.StatusOK, later.status, "%s", later.raw)
	b.waitJS("the change made elsewhere is listed", fmt.Sprintf(`(() => {
		const li = [...document.querySelectorAll('#changes li[data-voucher-id="%s"]')];
		return li.length === 2 && li[0].textContent.includes('closes') && /by root$/.test(li[0].textContent);
	})()`, id))
	b.screenshot("operator-steered")

	require.Equal(t, "0", b.eval(`String(localStorage.length + sessionStorage.length)`), "the admin token is kept in memory only")
	require.NotContains(t, b.eval(`document.cookie + location.href`), ts.cfg.AdminToken)
}
