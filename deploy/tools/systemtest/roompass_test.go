package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// admittedPass joins voucherID's line as token's shopper and waits for the
// pass.
func (ts *testSystem) admittedPass(t *testing.T, voucherID, token string) string {
	t.Helper()
	path := "/api/v1/vouchers/" + voucherID + "/queue"
	j := ts.do(t, http.MethodPost, path, token, nil, nil)
	require.Equal(t, http.StatusOK, j.status, "join: %s", j.raw)
	var pass string
	require.Eventually(t, func() bool {
		q := ts.do(t, http.MethodGet, path, token, nil, nil)
		p, _ := q.body["pass"].(string)
		pass = p
		return q.body["state"] == "admitted" && p != ""
	}, 30*time.Second, 50*time.Millisecond, "never admitted")
	return pass
}

// startRoomShopper starts a system with a waiting-room voucher on sale
// (stock 5, two a shopper) and one shopper admitted with its pass. Its
// topic is on the in-process broker, whose request hooks let a test hold a
// produce (stack.HoldProduce); Apache Kafka has none.
func startRoomShopper(t *testing.T) (ts *testSystem, voucherID string, userID int64, token, pass string) {
	t.Helper()
	ts = startSystem(t, map[string]string{
		"SECKILL_KAFKA_BROKERS": stack.KafkaBrokers[0],
		"SECKILL_KAFKA_TOPIC":   stack.NewTopic(t, 6),
	})
	voucherID = ts.createRoomVoucher(t, 5, 2, 5, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	userID = testUser()
	token = ts.shopper(t, userID)
	return ts, voucherID, userID, token, ts.admittedPass(t, voucherID, token)
}

// userOrders counts the user's orders of the voucher in PostgreSQL, by status.
func (ts *testSystem) userOrders(t *testing.T, voucherID string, userID int64) map[string]int {
	t.Helper()
	vid, err := strconv.ParseInt(voucherID, 10, 64)
	require.NoError(t, err)
	rows, err := ts.pool.Query(context.Background(),
		`SELECT status, count(*) FROM orders WHERE voucher_id = $1 AND user_id = $2 GROUP BY status`, vid, userID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		require.NoError(t, rows.Scan(&st, &n))
		out[st] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// TestRoomPassOfAFencedBuyIsGivenBack: the broker sits on a buy's message
// past the buy's wait, so the buy settles its outcome by fencing the order
// in PostgreSQL (failed) before it answers 503 with its stock back. The
// message lands afterwards and must not become an order, and the pass,
// whose buy is known not to have happened, buys once more: one sale on one
// pass, never two.
func TestRoomPassOfAFencedBuyIsGivenBack(t *testing.T) {
	// This test is serial (main_test.go): it hooks the in-process broker's produce requests.
	ts, vid, uid, tok, pass := startRoomShopper(t)

	held, release := stack.HoldProduce(t, ts.cfg.KafkaTopic)
	slow := ts.buyWithPass(t, vid, tok, pass, "k1")
	require.Equal(t, http.StatusServiceUnavailable, slow.status, "%s", slow.raw)
	select {
	case <-held:
	default:
		t.Fatal("the 503 did not come from the held produce")
	}
	require.Equal(t, map[string]int{"failed": 1}, ts.userOrders(t, vid, uid), "the fence is written before the answer")
	release()

	again := ts.buyWithPass(t, vid, tok, pass, "k2")
	require.Equal(t, http.StatusAccepted, again.status, "the pass of a buy that did not happen buys: %s", again.raw)
	require.Eventually(t, func() bool { return ts.userOrders(t, vid, uid)["created"] == 1 },
		30*time.Second, 50*time.Millisecond, "the second buy never became an order")
	third := ts.buyWithPass(t, vid, tok, pass, "k3")
	require.Equal(t, http.StatusForbidden, third.status, "a second sale on one pass: %s", third.raw)

	require.Equal(t, map[string]int{"created": 1, "failed": 1}, ts.userOrders(t, vid, uid), "the late message made no order")
	st := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, st.status, "%s", st.raw)
	require.EqualValues(t, 1, st.body["queue"].(map[string]any)["passes_used"])
}

// TestRoomReplayNeedsNoPass: the retry of a waiting-room buy with its
// Idempotency-Key gets its order back whatever pass it carries (none, a
// forged one, the used one), as every replay does; the pass judged first
// refused it 403. A key that made no order is still refused, and nothing is
// sold twice.
func TestRoomReplayNeedsNoPass(t *testing.T) {
	t.Parallel()
	ts, vid, uid, tok, pass := startRoomShopper(t)

	bought := ts.buyWithPass(t, vid, tok, pass, "k1")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	order := bought.body["order_id"]
	forged := "p1." + vid + "." + strconv.FormatInt(uid, 10) + ".99999999999999.forged"
	for name, p := range map[string]string{"no pass": "", "a forged pass": forged, "the used pass": pass} {
		r := ts.buyWithPass(t, vid, tok, p, "k1")
		require.Equal(t, http.StatusAccepted, r.status, "replay with %s: %s", name, r.raw)
		require.Equal(t, order, r.body["order_id"], "replay with %s", name)
	}
	for name, p := range map[string]string{"no pass": "", "the used pass": pass} {
		r := ts.buyWithPass(t, vid, tok, p, "k2")
		require.Equal(t, http.StatusForbidden, r.status, "a new key with %s: %s", name, r.raw)
		require.Equal(t, "not_admitted", r.errorCode())
	}
	ts.waitPersisted(t, vid, 1)
	late := ts.buyWithPass(t, vid, tok, "", "k1")
	require.Equal(t, http.StatusAccepted, late.status, "%s", late.raw)
	require.Equal(t, order, late.body["order_id"])
	require.Equal(t, "created", late.body["status"], "the replay tells the order's status now")
	require.Equal(t, map[string]int{"created": 1}, ts.userOrders(t, vid, uid))
}
