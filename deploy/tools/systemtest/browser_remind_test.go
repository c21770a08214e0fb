package systemtest

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The shopper page's service worker (web/sw.js, registered by
// web/remind.js) in real Chromium: given a push as a push service would
// deliver it (the DevTools protocol's ServiceWorker.deliverPushMessage),
// it shows the turn's notification, which registration.getNotifications()
// then lists with the sale's link. Signed in, the page's reminder form
// keeps and forgets the shopper's address.
func TestBrowserServiceWorkerShowsTurn(t *testing.T) {
	ts := startSystem(t, nil)
	b := openBrowser(t, ts.base)
	origin := strings.TrimSuffix(ts.base, "/")

	_, err := chromedp.CallBrowser(b.timeout(10*time.Second), cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin})
	require.NoError(t, err)

	var mu sync.Mutex
	var regID serviceworker.RegistrationID
	require.NoError(t, chromedp.Listen(b.ctx, func(ev any) {
		if u, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			for _, r := range u.Registrations {
				if strings.HasPrefix(r.ScopeURL, origin) && !r.IsDeleted {
					mu.Lock()
					regID = r.RegistrationID
					mu.Unlock()
				}
			}
		}
	}))
	_, err = chromedp.Call(b.timeout(10*time.Second), serviceworker.Enable, struct{}{})
	require.NoError(t, err)
	b.eval(`navigator.serviceWorker.ready.then((r) => { window.__swActive = r.active && r.active.scriptURL; }), 'waiting'`)
	b.waitJS("the service worker is active", `Boolean(window.__swActive)`)
	require.True(t, strings.HasSuffix(b.eval(`window.__swActive`), "/sw.js"))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return regID != "" }, 10*time.Second, 50*time.Millisecond,
		"the DevTools protocol names the registration")

	until := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)
	data, err := json.Marshal(map[string]string{"title": "Your turn: Spring sale", "body": "Buy before " + until.Format(time.RFC3339),
		"url": ts.base + "/?voucher=77", "voucher_id": "77", "until": until.Format(time.RFC3339)})
	require.NoError(t, err)
	mu.Lock()
	id := regID
	mu.Unlock()
	// A headless browser's notifications close soon after they show:
	// the page watches for the sale's one from before the push is sent.
	b.eval(`window.__notes = null; (async () => {
	  const r = await navigator.serviceWorker.ready;
	  for (let i = 0; i < 6000 && window.__notes === null; i++) {
	    const ns = await r.getNotifications({tag: 'turn-77'});
	    if (ns.length) {
	      window.__notes = JSON.stringify(ns.map((n) => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url})));
	    } else {
	      await new Promise((done) => setTimeout(done, 5));
	    }
	  }
	})(), 'watching'`)
	_, err = chromedp.Call(b.timeout(10*time.Second), serviceworker.DeliverPushMessage,
		serviceworker.DeliverPushMessageParams{Origin: origin, RegistrationID: id, Data: string(data)})
	require.NoError(t, err)
	b.waitJS("the notification is shown", `window.__notes !== null`)
	var notes []struct{ Title, Body, Tag, URL string }
	require.NoError(t, json.Unmarshal([]byte(b.eval(`window.__notes`)), &notes))
	require.Len(t, notes, 1)
	require.Equal(t, "Your turn: Spring sale", notes[0].Title)
	require.Contains(t, notes[0].Body, until.Format(time.RFC3339))
	require.Equal(t, "turn-77", notes[0].Tag)
	u, err := url.Parse(notes[0].URL)
	require.NoError(t, err)
	require.Equal(t, "77", u.Query().Get("voucher"))

	// Signed in, the page offers the reminders; the address typed is
	// kept for its shopper (and for nobody else), and forgotten again.
	name := "remind" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	b.registerAndLogIn(name, "correct horse battery staple")
	b.waitJS("the reminders are offered", `!document.querySelector('#remind-section').hidden`)
	addr := name + "@mail.example"
	b.do("save an address", chromedp.SendKeys(chromedp.ID("remind-email"), addr),
		chromedp.Click(chromedp.CSS(`#remind-email-form button[type=submit]`)))
	b.waitJS("the page says it is kept", `document.querySelector('#remind-status').textContent.includes('not verified')`)
	var kept string
	require.NoError(t, ts.pool.QueryRow(t.Context(),
		`SELECT e.address FROM reminder_emails e JOIN users u ON u.id = e.user_id WHERE u.username = $1`, name).Scan(&kept))
	require.Equal(t, addr, kept)
	b.do("forget it", chromedp.Click(chromedp.ID("remind-email-off")))
	b.waitJS("the page says it is forgotten", `document.querySelector('#remind-status').textContent.includes('forgotten')`)
	var left int
	require.NoError(t, ts.pool.QueryRow(t.Context(), `SELECT count(*) FROM reminder_emails WHERE address = $1`, addr).Scan(&left))
	require.Zero(t, left)
}
