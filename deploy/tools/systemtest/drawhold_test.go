package systemtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// holdStates counts a voucher's card holds by state, from PostgreSQL.
func (ts *testSystem) holdStates(t *testing.T, vid string) map[string]int {
	t.Helper()
	rows, err := ts.pool.Query(t.Context(), `SELECT state, count(*) FROM draw_holds WHERE voucher_id = $1::bigint GROUP BY state`, vid)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// untilHolds waits up to a minute for the voucher's holds to read want.
func (ts *testSystem) untilHolds(t *testing.T, vid string, want map[string]int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := ts.holdStates(t, vid)
		if assert.ObjectsAreEqual(want, got) {
			return
		}
		if time.Now().After(deadline) {
			require.Equal(t, want, got, "the holds within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDrawHoldsChargeOnlyWinners: a draw whose entries hold the shopper's
// card, through Stripe (the package's stripe-mock) and a private drand
// network. Each entry answers its hold (entering again: the same one); a
// newcomer after begin_at is refused and holds nothing; after the draw the
// sweeper releases the losers' holds, captures the hold of the winner who
// buys (the order paid, its payment succeeded, asked by the page or not),
// and releases the other
// winner's once the passes expired. A hold voucher on a line room is 400.
func TestDrawHoldsChargeOnlyWinners(t *testing.T) {
	t.Parallel()
	env := drandEnv(t)
	env["SECKILL_PAYMENT_PROVIDER"] = "stripe"
	env["SECKILL_STRIPE_API_BASE"] = stack.StripeMock(t).URL
	env["SECKILL_STRIPE_SECRET_KEY"] = devstack.StripeMockKey
	env["SECKILL_STRIPE_WEBHOOK_SECRET"] = stripetest.Secret
	a := startSystem(t, env)

	begin := time.Now().Add(4 * time.Second)
	voucher := func(mode string) answer {
		return a.do(t, http.MethodPost, "/api/v1/admin/vouchers", a.cfg.AdminToken, map[string]any{
			"title": "held draw", "kind": "seckill", "price_cents": 250, "stock": 4, "per_user_limit": 2,
			"begin_at": begin.UTC().Format(time.RFC3339Nano), "end_at": begin.Add(time.Hour).UTC().Format(time.RFC3339),
			"waiting_room": map[string]any{"admit_per_second": 10, "prequeue_seconds": 60, "mode": mode, "draw_hold": true},
		}, nil)
	}
	line := voucher("line")
	require.Equal(t, http.StatusBadRequest, line.status, "%s", line.raw)
	assert.Equal(t, "invalid_input", line.errorCode())
	assert.Contains(t, string(line.raw), "draw_hold")

	created := voucher("draw")
	require.Equal(t, http.StatusCreated, created.status, "%s", created.raw)
	vid := created.body["id"].(string)
	assert.Equal(t, true, created.body["waiting_room"].(map[string]any)["draw_hold"])

	const entrants = 5 // 4 units at 2 each: 2 winners
	path := "/api/v1/vouchers/" + vid + "/queue"
	toks := make([]string, entrants)
	for i := range toks {
		toks[i] = a.shopper(t, testUser())
		e := a.do(t, http.MethodPost, path, toks[i], nil, nil)
		require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
		hold, ok := e.body["hold"].(map[string]any)
		require.True(t, ok, "the entry answers its hold: %s", e.raw)
		assert.EqualValues(t, 500, hold["amount_cents"], "price × per_user_limit")
		assert.Equal(t, "held", hold["status"])
		assert.Equal(t, "stripe", hold["provider"])
		assert.NotEmpty(t, hold["client_secret"])
		again := a.do(t, http.MethodPost, path, toks[i], nil, nil)
		require.Equal(t, http.StatusOK, again.status, "%s", again.raw)
		assert.Equal(t, hold["payment_id"], again.body["hold"].(map[string]any)["payment_id"], "entering again keeps the hold")
	}
	a.untilHolds(t, vid, map[string]int{"held": entrants})

	time.Sleep(time.Until(begin) + 100*time.Millisecond)
	late := a.do(t, http.MethodPost, path, a.shopper(t, testUser()), nil, nil)
	require.Equal(t, http.StatusConflict, late.status, "%s", late.raw)
	assert.Equal(t, "ended", late.errorCode())

	var winners []int
	var passes []string
	deadline := time.Now().Add(30 * time.Second)
	for len(winners) == 0 && time.Now().Before(deadline) {
		for i, tok := range toks {
			q := a.do(t, http.MethodGet, path, tok, nil, nil)
			if q.body["state"] == string(waitroom.StateWon) {
				winners, passes = append(winners, i), append(passes, q.body["pass"].(string))
			}
		}
		if len(winners) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	require.Len(t, winners, 2, "two winners")
	// The losers' holds go right after the draw.
	a.untilHolds(t, vid, map[string]int{"held": 2, "released": entrants - 2})

	buyer := toks[winners[0]]
	bought := a.buyWithPass(t, vid, buyer, passes[0], "")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	order := bought.body["order_id"].(string)
	a.waitStatus(t, buyer, order, "created")
	// The page asks for its payment: the hold captured, by this request
	// or by the sweep just before it.
	pays := a.do(t, http.MethodPost, "/api/v1/orders/"+order+"/payments", buyer, nil, nil)
	if pays.status == http.StatusCreated {
		assert.Equal(t, "succeeded", pays.body["status"], "%s", pays.raw)
		assert.EqualValues(t, 250, pays.body["amount_cents"], "the order's amount, not the whole hold")
	} else {
		require.Equal(t, http.StatusConflict, pays.status, "captured by the sweep first: %s", pays.raw)
	}
	paid := a.waitStatus(t, buyer, order, "paid")
	pay, _ := paid.body["payment"].(map[string]any)
	require.NotNil(t, pay, "%s", paid.raw)
	assert.Equal(t, "succeeded", pay["status"])
	assert.Equal(t, "stripe", pay["provider"])
	a.untilHolds(t, vid, map[string]int{"captured": 1, "held": 1, "released": entrants - 2})

	// The other winner's pass expires unused (the draw made 11 minutes
	// ago, past its 600 s): their hold goes too.
	_, err := a.pool.Exec(t.Context(), `UPDATE draws SET ended_at = ended_at - interval '11 minutes' WHERE voucher_id = $1::bigint`, vid)
	require.NoError(t, err)
	a.untilHolds(t, vid, map[string]int{"captured": 1, "released": entrants - 1})
	var n int
	require.NoError(t, a.pool.QueryRow(t.Context(), `SELECT count(*) FROM payments WHERE order_id = $1::bigint`, order).Scan(&n))
	assert.Equal(t, 1, n, "one payment: the captured hold")
}
