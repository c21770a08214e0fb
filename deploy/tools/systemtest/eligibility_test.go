package systemtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/eligibility"
)

// entryMerchant signs entry tokens with a key the system under test knows
// as kid "shop-1" (SECKILL_ENTRY_TOKEN_KEYS).
type entryMerchant struct{ priv ed25519.PrivateKey }

func newEntryMerchant(t *testing.T) (entryMerchant, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return entryMerchant{priv: priv}, "shop-1=" + base64.StdEncoding.EncodeToString(pub)
}

func (m entryMerchant) token(t *testing.T, voucherID string, userID int64, person, lane string, ttl time.Duration) string {
	t.Helper()
	c := eligibility.Claims{
		RegisteredClaims: jwt.RegisteredClaims{Subject: strconv.FormatInt(userID, 10),
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(ttl))},
		VoucherID: voucherID, Person: person, Lane: lane,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = "shop-1"
	s, err := tok.SignedString(m.priv)
	require.NoError(t, err)
	return s
}

// roomVoucher creates a seckill voucher with a waiting room and entry
// rule; its pre-queue opens now and begin_at is later, or it is a draw.
func (ts *testSystem) roomVoucher(t *testing.T, mode string, entry map[string]any) string {
	t.Helper()
	now := time.Now()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "invited sale", "kind": "seckill", "price_cents": 100, "stock": 10, "per_user_limit": 1,
		"begin_at": now.Add(time.Hour).UTC().Format(time.RFC3339), "end_at": now.Add(2 * time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 10, "prequeue_seconds": 7200, "mode": mode},
		"entry":        entry,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	require.Equal(t, entry, a.body["entry"], "the voucher shows its entry rule")
	return a.body["id"].(string)
}

func (ts *testSystem) join(t *testing.T, voucherID string, userID int64, entryToken string) answer {
	t.Helper()
	h := map[string]string{}
	if entryToken != "" {
		h["Seckill-Entry-Token"] = entryToken
	}
	return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+voucherID+"/queue", ts.shopper(t, userID), map[string]any{}, h)
}

// One person, one chance, in a line and in a draw: without a token, with a
// forged, expired or someone else's one, the join is 403 not_eligible; a
// farm of 30 accounts of one person racing with valid tokens gets one
// place; a priority token's place is ahead of every standard one; a shopper
// already in line keeps the place without a token. The checks hold over
// real HTTP, on the real Redis and PostgreSQL (the voucher's rule is
// stored and read back by the catalog).
func TestEntryTokensOnePersonOneChance(t *testing.T) {
	t.Parallel()
	m, keys := newEntryMerchant(t)
	// The draw commits to a round of the package's beacon when it is made,
	// and takes entries only then.
	env := drandEnv(t)
	env["SECKILL_ENTRY_TOKEN_KEYS"] = keys
	ts := startSystem(t, env)
	entry := map[string]any{"token_required": true, "allowlist": false}

	for _, mode := range []string{"line", "draw"} {
		t.Run(mode, func(t *testing.T) {
			vid := ts.roomVoucher(t, mode, entry)
			base := int64(9_600_000)
			if mode == "draw" {
				base = 9_700_000
			}
			other, _ := newEntryMerchant(t)
			for name, tok := range map[string]string{
				"none":            "",
				"forged":          other.token(t, vid, base+1, "p-1", "", time.Hour),
				"expired":         m.token(t, vid, base+1, "p-1", "", -time.Minute),
				"another account": m.token(t, vid, base+2, "p-1", "", time.Hour),
				"another voucher": m.token(t, "1", base+1, "p-1", "", time.Hour),
			} {
				a := ts.join(t, vid, base+1, tok)
				require.Equal(t, http.StatusForbidden, a.status, "%s: %s", name, a.raw)
				require.Equal(t, "not_eligible", a.errorCode(), "%s: %s", name, a.raw)
			}

			// A farm: 30 accounts of person "p-farm", each with a valid
			// token of its own, join at once.
			var mu sync.Mutex
			codes := map[int]int{}
			var wg sync.WaitGroup
			for i := range int64(30) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a := ts.join(t, vid, base+100+i, m.token(t, vid, base+100+i, "p-farm", "", time.Hour))
					mu.Lock()
					codes[a.status]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusForbidden: 29}, codes, "one place per person")

			// Honest shoppers, a quarter of them in the priority lane.
			for i := range int64(12) {
				lane := "standard"
				if i%4 == 0 {
					lane = "priority"
				}
				a := ts.join(t, vid, base+200+i, m.token(t, vid, base+200+i, "p-"+strconv.FormatInt(i, 10), lane, time.Hour))
				require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
				if mode == "draw" {
					require.Equal(t, "entered", a.body["state"], "%s", a.raw)
					continue
				}
				require.Equal(t, "waiting", a.body["state"], "%s", a.raw)
			}
			again := ts.join(t, vid, base+200, "")
			require.Equal(t, http.StatusOK, again.status, "a shopper in line keeps the place without a token: %s", again.raw)
			if mode == "draw" {
				return
			}
			var lastPriority, firstStandard float64 = 0, 1e9
			for i := range int64(12) {
				q := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, base+200+i), nil, nil)
				require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
				pos := q.body["position"].(float64)
				if i%4 == 0 {
					lastPriority = max(lastPriority, pos)
				} else {
					firstStandard = min(firstStandard, pos)
				}
			}
			require.Less(t, lastPriority, firstStandard, "every priority place is ahead of every standard one")
		})
	}
}

// A voucher that takes entries only from its allowlist: an account not on
// it is 403 not_eligible, one the operator uploads joins; the upload is
// the operator's (a shopper is 403 forbidden), counted, and a voucher
// without an allowlist refuses one (409).
func TestAllowlistEntries(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.roomVoucher(t, "line", map[string]any{"token_required": false, "allowlist": true})

	a := ts.join(t, vid, 9_800_001, "")
	require.Equal(t, http.StatusForbidden, a.status, "%s", a.raw)
	require.Equal(t, "not_eligible", a.errorCode())

	up := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers/"+vid+"/allowlist", ts.cfg.AdminToken,
		map[string]any{"user_ids": []string{"9800001", "9800002", "9800002"}}, nil)
	require.Equal(t, http.StatusOK, up.status, "%s", up.raw)
	require.Equal(t, map[string]any{"voucher_id": vid, "entries": 2.0}, up.body)
	shopper := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers/"+vid+"/allowlist", ts.shopper(t, 9_800_003),
		map[string]any{"user_ids": []string{"9800003"}}, nil)
	require.Equal(t, http.StatusForbidden, shopper.status, "a shopper's token is no operator's: %s", shopper.raw)
	bad := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers/"+vid+"/allowlist", ts.cfg.AdminToken,
		map[string]any{"user_ids": []string{"x"}}, nil)
	require.Equal(t, http.StatusBadRequest, bad.status, "%s", bad.raw)

	for _, u := range []int64{9_800_001, 9_800_002} {
		a := ts.join(t, vid, u, "")
		require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	}
	a = ts.join(t, vid, 9_800_003, "")
	require.Equal(t, http.StatusForbidden, a.status, "%s", a.raw)

	clear := ts.do(t, http.MethodDelete, "/api/v1/admin/vouchers/"+vid+"/allowlist", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, clear.status, "%s", clear.raw)
	require.Equal(t, 0.0, clear.body["entries"])

	open := ts.createVoucher(t, 5, 1, time.Now(), time.Now().Add(time.Hour))
	no := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers/"+open+"/allowlist", ts.cfg.AdminToken,
		map[string]any{"user_ids": []string{"1"}}, nil)
	require.Equal(t, http.StatusConflict, no.status, "%s", no.raw)
}

// TestBrowserInvitedLine: on a voucher that takes joins only with the
// merchant's entry token, the page's Join the line without one says the
// sale is by invitation and joins nothing; opened from the merchant's link
// (/?entry_token=...), the same page joins. The operator page offers the
// rule when it creates a voucher, and its list says so.
func TestBrowserInvitedLine(t *testing.T) {
	t.Parallel()
	m, keys := newEntryMerchant(t)
	ts := startSystem(t, map[string]string{"SECKILL_ENTRY_TOKEN_KEYS": keys})
	vid := newVoucher(t, ts, "Invited drop", 5, 1, func(b map[string]any) {
		b["waiting_room"] = map[string]any{"admit_per_second": 1}
		b["entry"] = map[string]any{"token_required": true}
	})
	b := openBrowser(t, ts.base)
	c := card(vid)
	b.waitJS("the card shows the waiting room", fmt.Sprintf(`document.querySelector('%s .queue')?.hidden === false`, c))
	b.registerAndLogIn(newShopperName(), "correct horse battery")
	b.waitJS("Join the line is offered", fmt.Sprintf(`document.querySelector('%s .join')?.hidden === false && !document.querySelector('%s .join').disabled`, c, c))
	b.do("join without a token", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("the page says why", `document.querySelector('#message').textContent.includes('invited')`)
	require.Contains(t, b.message(), "entry token")
	require.NotEqual(t, "waiting", b.eval(fmt.Sprintf(`String(document.querySelector('%s .queue').dataset.state)`, c)))

	uid, err := strconv.ParseInt(b.eval(`JSON.parse(sessionStorage.getItem('seckill.session')).userId`), 10, 64)
	require.NoError(t, err)
	b.do("open the merchant's link", chromedp.Navigate(ts.base+"/?entry_token="+m.token(t, vid, uid, "p-page", "", time.Hour)))
	b.waitCard(vid)
	b.waitJS("Join the line is offered again", fmt.Sprintf(`document.querySelector('%s .join')?.hidden === false && !document.querySelector('%s .join').disabled`, c, c))
	b.do("join with the merchant's token", chromedp.Click(chromedp.CSS(c+" .join")))
	b.waitJS("in line", fmt.Sprintf(`['waiting', 'admitted'].includes(document.querySelector('%s .queue').dataset.state)`, c))
	b.screenshot("invited-line")

	op := openOperatorPage(t, ts)
	const title = "Operator-made invitation"
	op.eval(`document.querySelector('#v-stock').value = ''; document.querySelector('#v-limit').value = ''`)
	op.do("fill in a voucher by invitation",
		chromedp.SendKeys(chromedp.ID("v-title"), title),
		chromedp.SendKeys(chromedp.ID("v-price"), "3.00"),
		chromedp.SendKeys(chromedp.ID("v-stock"), "2"),
		chromedp.SendKeys(chromedp.ID("v-limit"), "1"),
		chromedp.Click(chromedp.ID("v-room")),
		chromedp.Click(chromedp.ID("v-entry-token")),
		chromedp.Click(chromedp.ID("v-entry-allowlist")),
		chromedp.Click(chromedp.ID("v-create")))
	op.waitJS("the voucher list says it is by invitation", fmt.Sprintf(`[...document.querySelectorAll('#stats tbody tr')].some((tr) =>
		tr.querySelector('[data-field="title"] .name').textContent === %q &&
		tr.querySelector('[data-field="title"]').textContent.includes('by invitation (entry token + allowlist)'))`, title))
	found := false
	for _, v := range ts.do(t, http.MethodGet, "/api/v1/vouchers", "", nil, nil).list {
		if v["title"] == title {
			found = true
			require.Equal(t, map[string]any{"token_required": true, "allowlist": true}, v["entry"])
		}
	}
	require.True(t, found, "the voucher made in the page exists")
}
