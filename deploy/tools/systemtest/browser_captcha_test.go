package systemtest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// TestBrowserCaptchaBuy: on a voucher that asks for a captcha, Buy without
// an answer asks for one and sends nothing; a wrong answer says so and shows
// a new picture; the right answer buys.
func TestBrowserCaptchaBuy(t *testing.T) {
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
