package systemtest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserHeldTurnAndPowLine: a shopper signs up where registering
// takes a proof of work, joins a pow voucher's line from the page (the
// page solves both challenges itself), is admitted, and lets the pass
// lapse (three seconds here). The card then says the turn is held until
// when, in its live region too, with Take my turn, which reads the queue
// again and buys with the fresh pass; axe finds nothing serious in the
// held card. Lean: one system, no waiting for the
// grace to end.
func TestBrowserHeldTurnAndPowLine(t *testing.T) {
	start := time.Now()
	ts := startSystem(t, map[string]string{"SECKILL_ROOM_PASS_TTL": "3s", "SECKILL_REGISTER_CHALLENGE": "pow"})
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "held pow turn", "kind": "seckill", "price_cents": 250, "stock": 3, "per_user_limit": 1,
		"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 20}, "grace_seconds": 60, "challenge": "pow",
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	vid := a.body["id"].(string)
	c := card(vid)

	b := openBrowser(t, ts.base)
	b.waitJS("the card shows the waiting room", fmt.Sprintf(`!document.querySelector('%s .queue').hidden`, c))
	b.registerAndLogIn(newShopperName(), "correct horse battery") // a sign-up under pow
	require.True(t, b.eval(`document.querySelector('#login-captcha').hidden`) == "true", "no captcha under pow")

	// A pow line: a join without a solved challenge is refused, the page's is not.
	bare := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, testUser()), nil, nil)
	require.Equal(t, http.StatusBadRequest, bare.status, "%s", bare.raw)
	b.waitJS("Join the line is offered", fmt.Sprintf(`!document.querySelector('%s .join').hidden && !document.querySelector('%s .join').disabled`, c, c))
	b.do("join the line", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJSFor("admitted", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'admitted'`, c), 10*time.Second)

	// Away past the pass: held, pushed, said in the card's live region.
	b.waitJSFor("the turn is held", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'held' &&
		!document.querySelector('%s .take').hidden && document.querySelector('%s .buy').hidden`, c, c, c), 20*time.Second)
	require.Regexp(t, `^Your turn came while you were away; it is held until \d\d:\d\d.* \(`, b.eval(fmt.Sprintf(`document.querySelector('%s .queue-headline').textContent`, c)))
	require.Contains(t, b.eval(fmt.Sprintf(`document.querySelector('%s .card-notice').textContent`, c)), "came while you were away")
	require.Equal(t, "Take my turn", b.eval(fmt.Sprintf(`document.querySelector('%s .take').textContent`, c)))
	// axe in every view: the held card's contrast, names and live region.
	require.Empty(t, b.checkA11y("room-held", axeSource(t)))

	b.do("take the turn", chromedp.Click(chromedp.CSS(c+" .take")))
	b.waitJS("the new order is listed", `document.querySelectorAll('[data-order-id]').length > 0`)
	order := b.eval(`document.querySelector('#orders [data-order-id]').dataset.orderId`)
	b.waitStatus(order, "created", 30*time.Second)
	b.waitJS("the turn is used", fmt.Sprintf(`document.querySelector('%s .queue').dataset.state === 'used'`, c))
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}
