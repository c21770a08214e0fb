package systemtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// TestBrowserPowBuy: on a voucher whose challenge is pow, the page solves
// the proof of work in its Web Worker while the card is on sale, with
// nothing for the shopper to do, and Buy spends it.
func TestBrowserPowBuy(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := newVoucher(t, ts, "Limited sneakers", 5, 2, func(b map[string]any) { b["challenge"] = "pow" })
	b := openBrowser(t, ts.base)
	b.waitCard(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJSFor("the check solved before the press", fmt.Sprintf(`document.querySelector('%s').dataset.pow === 'ready'`, card(vid)), time.Minute)
	require.Equal(t, "true", b.eval(fmt.Sprintf(`String(document.querySelector('%s .captcha').hidden)`, card(vid))), "no captcha to read")
	order := b.buy(vid)
	b.waitStatus(order, "created", 30*time.Second)

	// The spent challenge is gone, and a second buy solves a new one.
	keys, err := ts.rdb.Keys(context.Background(), edge.PoWKeyPrefix+"*").Result()
	require.NoError(t, err)
	for _, k := range keys {
		require.Len(t, strings.TrimPrefix(k, edge.PoWKeyPrefix), 32, "only live challenges: %v", keys)
	}
	b.waitJSFor("the next check solved", fmt.Sprintf(`document.querySelector('%s').dataset.pow === 'ready' && !document.querySelector('%s .buy').disabled`, card(vid), card(vid)), time.Minute)
	second := b.buy(vid)
	require.NotEqual(t, order, second)
	b.waitStatus(second, "created", 30*time.Second)
	b.screenshot("pow-bought")
}

// TestBrowserAudioCaptchaBuy: "Listen instead" swaps the picture for the
// same kind of captcha read aloud, in a labelled audio player; the digits
// heard buy.
func TestBrowserAudioCaptchaBuy(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := newVoucher(t, ts, "Concert tickets", 5, 1, func(b map[string]any) { b["challenge"] = "captcha" })
	b := openBrowser(t, ts.base)
	b.waitCard(vid)
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJS("the captcha picture", fmt.Sprintf(
		`window.__captchaIDs.length === 1 && !document.querySelector('%s .captcha').hidden`, card(vid)))

	b.do("press Listen instead", chromedp.Click(chromedp.CSS(card(vid)+" .captcha-listen")))
	b.waitJS("the audio captcha", fmt.Sprintf(`window.__captchaIDs.length === 2 && !document.querySelector('%s .captcha-audio').hidden`, card(vid)))
	player := card(vid) + " .captcha-audio"
	require.True(t, strings.HasPrefix(b.eval(fmt.Sprintf(`document.querySelector('%s').src`, player)), "data:audio/wav;base64,"))
	require.NotEmpty(t, b.eval(fmt.Sprintf(`document.querySelector('%s').getAttribute('aria-label')`, player)), "the player has a name")
	require.Equal(t, "true", b.eval(fmt.Sprintf(`String(document.querySelector('%s .captcha-img').hidden)`, card(vid))))
	require.Equal(t, "Digits you hear", b.eval(fmt.Sprintf(`document.querySelector('%s .captcha-label').textContent`, card(vid))))

	id, err := strconv.Unquote(b.eval(`JSON.stringify(window.__captchaIDs[1])`))
	require.NoError(t, err)
	answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err, "the page plays the captcha the gateway keeps")
	b.do("type the digits heard", chromedp.SendKeys("#captcha-"+vid, answer))
	order := b.buy(vid)
	b.waitStatus(order, "created", 30*time.Second)
}
