package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
)

// openSaleReport opens the operator page and the voucher's report on it.
func openSaleReport(t *testing.T, ts *testSystem, vid string) *browser {
	t.Helper()
	b := openOperatorPage(t, ts)
	reportButton := fmt.Sprintf(`#stats tbody tr[data-voucher-id="%s"] td[data-field="pause"] button.report-open`, vid)
	b.waitJS("the voucher's row has a Report button", fmt.Sprintf(`document.querySelector('%s') !== null`, reportButton))
	b.do("open the voucher's report", chromedp.Click(chromedp.CSS(reportButton)))
	return b
}

// figure is the script that reads one figure of the report shown.
func figure(field string) string {
	return fmt.Sprintf(`document.querySelector('#report [data-field="%s"] dd')?.textContent`, field)
}

// TestBrowserSaleReport: after a small sale (eight shoppers for five
// units, two of them paying), the operator page shows the voucher's report:
// the figures the API answers and its charts as inline SVG, one series per
// answer the sale gave.
func TestBrowserSaleReport(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	now := time.Now()
	vid := ts.createVoucher(t, 5, 1, now.Add(-time.Second), now.Add(time.Hour))
	var accepted []string
	for u := range int64(8) {
		a := ts.buy(t, vid, ts.shopper(t, 36_000_000+u), 1, "")
		switch a.status {
		case http.StatusAccepted:
			accepted = append(accepted, fmt.Sprint(a.body["order_id"]))
		default:
			require.Equal(t, "sold_out", a.errorCode(), "%s", a.raw)
		}
	}
	require.Len(t, accepted, 5)
	ts.waitPersisted(t, vid, 5)
	for i, id := range accepted[:2] {
		a := ts.do(t, http.MethodPost, "/api/v1/orders/"+id+"/pay", ts.shopper(t, 36_000_000+int64(i)), nil, nil)
		require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	}
	var rep api.SaleReport
	require.Eventually(t, func() bool {
		a := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/report", ts.cfg.AdminToken, nil, nil)
		rep = api.SaleReport{}
		require.NoError(t, json.Unmarshal(a.raw, &rep))
		return rep.Attempts == 8 && rep.Paid == 2 && len(rep.Timeline) > 0 && sumPaid(rep) == 2
	}, 20*time.Second, 200*time.Millisecond)

	b := openSaleReport(t, ts, vid)
	b.waitJS("the report is shown", fmt.Sprintf(`document.querySelector('#report').dataset.voucherId === %q && %s === '8'`, vid, figure("attempts")))
	require.Equal(t, "5", b.eval(figure("accepted")))
	require.Equal(t, "0 / 5", b.eval(figure("admitted_bought")), "no waiting room: none admitted, five bought")
	require.Equal(t, "2 (40.0%)", b.eval(figure("conversion")))
	require.Equal(t, "3", b.eval(`document.querySelector('#report [data-refusal="sold_out"] dd').textContent`))
	require.Contains(t, b.eval(figure("sold_out")), "after the first buy")
	require.Equal(t, "no line", b.eval(figure("time_in_line")))

	// The charts are inline SVG drawn by the page: one series per answer,
	// each a path across the sale's seconds; no line chart without a line.
	series := func(chart string) string {
		return b.eval(fmt.Sprintf(`[...document.querySelectorAll('#report svg.chart[data-chart="%s"] path.series')].map((p) => p.dataset.series).join(',')`, chart))
	}
	require.Equal(t, "attempts,accepted,sold_out", series("answers"))
	require.Equal(t, "paid,timed_out,returned", series("orders"))
	require.Equal(t, "0", b.eval(`String(document.querySelectorAll('#report svg.chart[data-chart="line"]').length)`))
	steps := b.eval(`String(document.querySelector('#report svg.chart[data-chart="answers"] path[data-series="attempts"]').getAttribute('d').split('M').length - 1)`)
	require.Equal(t, "1", steps, "one unbroken line")
	require.Equal(t, strconv.Itoa(2*len(rep.Timeline)), b.eval(`String(document.querySelector('#report svg.chart[data-chart="answers"] path[data-series="attempts"]').getAttribute('d').split(/[ML]/).length - 1)`),
		"two points a second: one flat step each")
	require.Equal(t, "0", b.eval(`String(document.querySelectorAll('#report svg image, #report svg use, #report svg foreignObject, script[src^="http"]').length)`),
		"self-contained: nothing loaded from elsewhere")
	b.eval(`document.querySelector('#report').scrollIntoView()`)
	t.Logf("screenshot: %s", b.screenshot("sale-report"))

	// A stray attempt a day after the sale: the report's buckets widen to
	// a minute, and the page draws one flat step per bucket, counted per
	// minute, not 86,400 seconds.
	stray := rep.Timeline[0].T.Add(24 * time.Hour)
	_, err := ts.pool.Exec(t.Context(), `INSERT INTO sale_counts (voucher_id, second, name, n)
		VALUES ($1, $2, 'attempts', 1), ($1, $2, 'refused:ended', 1)`, mustID(t, vid), stray)
	require.NoError(t, err)
	rep = ts.saleReport(t, vid)
	require.EqualValues(t, 60, rep.BucketSeconds)
	require.Len(t, rep.Timeline, 1441)
	b.eval(fmt.Sprintf(`document.querySelector('#report-voucher').value = %q`, vid))
	b.do("show the report again", chromedp.Click(chromedp.ID("report-show")))
	b.waitJS("the stray attempt is shown", figure("attempts")+` === '9'`)
	answers := `document.querySelector('#report svg.chart[data-chart="answers"]')`
	require.Equal(t, "60", b.eval(answers+`.dataset.bucketSeconds`))
	require.Equal(t, "Buy attempts per minute, by answer", b.eval(answers+`.getAttribute('aria-label')`))
	require.Equal(t, strconv.Itoa(2*len(rep.Timeline)), b.eval(answers+`.querySelector('path[data-series="attempts"]').getAttribute('d').split(/[ML]/).length - 1 + ''`),
		"two points a minute: one flat step each")
	require.Equal(t, "attempts,accepted,sold_out,ended", series("answers"))
	b.eval(`document.querySelector('#report').scrollIntoView()`)
	b.screenshot("sale-report-a-day")

	// A voucher nobody made is said so, not drawn.
	b.eval(`document.querySelector('#report-voucher').value = '1'`)
	b.do("ask for an unknown voucher", chromedp.Click(chromedp.ID("report-show")))
	b.waitJS("the page says it is not found", `document.querySelector('#message').textContent.includes('No report for voucher 1')`)
}
