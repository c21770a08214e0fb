package systemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMissedPassIsHeldThenFreshOnReturn: passes live a second here. A
// shopper admitted and away past the pass is not expired but held: an open
// socket is told held with held_until (the feed's look does not count as
// coming back), and the shopper's own read within the grace answers
// admitted at once with a fresh pass, which buys. Lean: one system, a
// second of pass, no waiting for the grace to end.
func TestMissedPassIsHeldThenFreshOnReturn(t *testing.T) {
	start := time.Now()
	ts := startSystem(t, map[string]string{"SECKILL_ROOM_PASS_TTL": "1s"})
	t.Logf("system up in %s", time.Since(start).Round(time.Millisecond))
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "held turn", "kind": "seckill", "price_cents": 250, "stock": 3, "per_user_limit": 1,
		"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 20}, "grace_seconds": 60,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	require.EqualValues(t, 60, a.body["grace_seconds"])
	vid := a.body["id"].(string)
	tok := ts.shopper(t, testUser())
	ws := ts.openWS(t, tok)
	ws.untilPong(t)

	first := ts.admittedPass(t, vid, tok)
	t.Logf("admitted at %s", time.Since(start).Round(time.Millisecond))
	// Away: the socket alone tells the turn held once the pass is gone.
	for {
		q := ws.nextQueue(t)
		if q.State != "held" {
			continue
		}
		require.NotNil(t, q.HeldUntil)
		require.Nil(t, q.Pass)
		require.True(t, q.HeldUntil.After(time.Now().Add(50*time.Second)), "held for the grace: %v", q.HeldUntil)
		break
	}

	t.Logf("told held at %s", time.Since(start).Round(time.Millisecond))
	path := "/api/v1/vouchers/" + vid + "/queue"
	back := ts.do(t, http.MethodGet, path, tok, nil, nil)
	require.Equal(t, http.StatusOK, back.status, "%s", back.raw)
	require.Equal(t, "admitted", back.body["state"], "back within the grace: %s", back.raw)
	fresh, _ := back.body["pass"].(string)
	require.NotEmpty(t, fresh)
	require.NotEqual(t, first, fresh)
	buy := ts.buyWithPass(t, vid, tok, fresh, "")
	require.Equal(t, http.StatusAccepted, buy.status, "%s", buy.raw)
}
