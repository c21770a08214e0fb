package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// mailTo is the newest message mailpit got for addr, with its text; ok
// false while there is none.
func mailTo(t *testing.T, mail *devstack.Mailpit, addr string) (devstack.MailMessage, bool) {
	t.Helper()
	m, ok, err := mail.MessageTo(context.Background(), addr)
	require.NoError(t, err)
	return m, ok
}

// mailDeadline is how a reminder writes a time (notify/remind/texts.go).
const mailDeadline = "2006-01-02 15:04:05 UTC"

// TestClosedTabIsMailedThenBuysWithinGrace: a shopper who gave an
// address joins the line over HTTP and goes away (no page, no socket).
// Their turn comes and goes unused: the e-mail of the turn reaches the
// package's mailpit through SMTP, to their address, naming the sale, the
// page and the deadline, the held place's end; the pass lapses and the
// room holds the place (seen in its record: any read by the shopper is
// coming back, and no socket is open to be told). Back within the grace,
// the place read as the page reads it says held with held_until (a third
// shopper has the unit), then, that shopper away too, a fresh pass, which
// buys. A second shopper who used the pass at once gets no
// e-mail. Lean: a pass of 3 s, a reminder after 1 s.
func TestClosedTabIsMailedThenBuysWithinGrace(t *testing.T) {
	start := time.Now()
	mail := stack.Mailpit(t)
	ts := startSystem(t, map[string]string{
		"SECKILL_ROOM_PASS_TTL": "3s", "SECKILL_REMIND_DELAY": "1s",
		"SECKILL_SMTP_URL": mail.SMTPURL, "SECKILL_PUBLIC_URL": "https://shop.example/",
	})
	t.Logf("system up in %s", time.Since(start).Round(time.Millisecond))
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	title := "Mailed sale " + tag
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": title, "kind": "seckill", "price_cents": 250, "stock": 2, "per_user_limit": 1,
		"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 20}, "grace_seconds": 60,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	vid := a.body["id"].(string)
	voucherID, err := strconv.ParseInt(vid, 10, 64)
	require.NoError(t, err)

	away, quick := testUser(), testUser()
	awayTok, quickTok := ts.shopper(t, away), ts.shopper(t, quick)
	awayAddr, quickAddr := "away-"+tag+"@mail.example", "quick-"+tag+"@mail.example"
	for tok, addr := range map[string]string{awayTok: awayAddr, quickTok: quickAddr} {
		r := ts.do(t, http.MethodPut, "/api/v1/reminders/email", tok, map[string]any{"address": addr}, map[string]string{"Accept-Language": "en"})
		require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	}
	// The turns as the room publishes them: the away shopper's pass
	// expiry is what the e-mail must name.
	sub := ts.rdb.Subscribe(t.Context(), waitroom.Channel)
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Receive(t.Context())
	require.NoError(t, err)

	path := "/api/v1/vouchers/" + vid + "/queue"
	j := ts.do(t, http.MethodPost, path, awayTok, nil, nil)
	require.Equal(t, http.StatusOK, j.status, "join: %s", j.raw)
	require.NotEqual(t, "admitted", j.body["state"], "the turn comes after the tab is closed: %s", j.raw)
	// The quick shopper joins, is admitted and buys at once.
	pass := ts.admittedPass(t, vid, quickTok)
	buy := ts.buyWithPass(t, vid, quickTok, pass, "")
	require.Equal(t, http.StatusAccepted, buy.status, "%s", buy.raw)

	// A third shopper waits for the last unit, which the away shopper's
	// pass holds: the lapse gives it to them, so the away shopper, back,
	// finds none spare and is told the place is held.
	next := testUser()
	nextTok := ts.shopper(t, next)
	w := ts.do(t, http.MethodPost, path, nextTok, nil, nil)
	require.Equal(t, http.StatusOK, w.status, "join: %s", w.raw)

	var turn waitroom.Turn
	for turn.UserID != away {
		select {
		case m := <-sub.Channel():
			if tu, ok := waitroom.ParseTurn(m.Payload); ok && tu.VoucherID == voucherID {
				turn = tu
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the away shopper's turn never came")
		}
	}
	t.Logf("turn at %s, pass until %s", time.Since(start).Round(time.Millisecond), turn.ValidUntil.UTC().Format(time.RFC3339Nano))

	var got devstack.MailMessage
	require.Eventually(t, func() bool {
		var ok bool
		got, ok = mailTo(t, mail, awayAddr)
		return ok
	}, 10*time.Second, 100*time.Millisecond, "no e-mail of the turn")
	t.Logf("mailed at %s", time.Since(start).Round(time.Millisecond))
	require.Len(t, got.To, 1)
	require.Contains(t, got.Subject, title)
	require.Contains(t, got.Text, title)
	require.Contains(t, got.Text, "https://shop.example/?voucher="+vid)

	// Away past the pass: the room holds the place (its own record, not a
	// read of the shopper's, which would be coming back).
	var heldUntil time.Time
	require.Eventually(t, func() bool {
		s, err := ts.rdb.ZScore(t.Context(), "waitroom:{v"+vid+"}:passes", "h:"+strconv.FormatInt(away, 10)).Result()
		if err != nil {
			return false
		}
		heldUntil = time.UnixMilli(int64(s) - 1<<44)
		return true
	}, 10*time.Second, 50*time.Millisecond, "the missed pass is never held")
	t.Logf("held at %s until %s", time.Since(start).Round(time.Millisecond), heldUntil.UTC().Format(time.RFC3339Nano))
	require.GreaterOrEqual(t, heldUntil.Sub(turn.ValidUntil), 60*time.Second, "held for the grace: %v", heldUntil)
	// The deadline the e-mail named is the held place's, not the pass's.
	require.Contains(t, got.Text, heldUntil.UTC().Format(mailDeadline), "the deadline: %s", got.Text)
	require.NotContains(t, got.Text, turn.ValidUntil.UTC().Format(mailDeadline), "not the lapsed pass's: %s", got.Text)

	// Back within the grace, the page reads the place: held, with its
	// end, while the third shopper has the unit.
	back := ts.do(t, http.MethodGet, path, awayTok, nil, nil)
	require.Equal(t, http.StatusOK, back.status, "%s", back.raw)
	require.Equal(t, "held", back.body["state"], "%s", back.raw)
	apiUntil, err := time.Parse(time.RFC3339Nano, back.body["held_until"].(string))
	require.NoError(t, err, "%s", back.raw)
	require.True(t, apiUntil.Equal(heldUntil), "held_until %v, the room's %v", apiUntil, heldUntil)
	// The third shopper misses theirs too; the unit comes free and goes
	// to the place come back first. The page reads the queue again.
	var fresh string
	require.Eventually(t, func() bool {
		q := ts.do(t, http.MethodGet, path, awayTok, nil, nil)
		require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
		fresh, _ = q.body["pass"].(string)
		return q.body["state"] == "admitted" && fresh != ""
	}, 15*time.Second, 200*time.Millisecond, "no fresh pass within the grace")
	t.Logf("fresh pass at %s", time.Since(start).Round(time.Millisecond))
	bought := ts.buyWithPass(t, vid, awayTok, fresh, "")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	require.Eventually(t, func() bool {
		return ts.userOrders(t, vid, away)["created"]+ts.userOrders(t, vid, away)["paid"] == 1
	}, 10*time.Second, 50*time.Millisecond, "the order is created")

	_, mailed := mailTo(t, mail, quickAddr)
	require.False(t, mailed, "a shopper who used the turn is not reminded")
	t.Logf("done in %s", time.Since(start).Round(time.Millisecond))
}
