package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserDraw: the page of a voucher sold by draw offers "Enter the
// draw" in the entry window and shows the commitment once entered; when
// the draw is made (the voucher pushed with its seed) it shows the result
// without a reload, with the shopper's ticket and the cut-off, and the Buy
// button to a winner.
func TestBrowserDraw(t *testing.T) {
	ts := startSystem(t, nil)
	begin := time.Now().Add(12 * time.Second)
	vid := ts.createDrawVoucher(t, 3, begin).body["id"].(string)
	b := openBrowser(t, ts.base)
	c := card(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJS("Enter the draw is offered, Buy is not", fmt.Sprintf(
		`!document.querySelector('%s .join').hidden && document.querySelector('%s .join').textContent === 'Enter the draw' &&
		 !document.querySelector('%s .join').disabled && document.querySelector('%s .buy').hidden`, c, c, c, c))
	b.do("enter the draw", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("the page shows the entry and the commitment", fmt.Sprintf(
		`document.querySelector('%s .queue').dataset.state === 'entered' &&
		 document.querySelector('%s .queue-headline').textContent.includes('Commitment')`, c, c))
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
