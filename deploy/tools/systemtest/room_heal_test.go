package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Redis loses its data during a room sale (FLUSHDB of a database only this
// test's process uses). The healer rebuilds the room with the stock: the
// admitted shopper's unexpired pass still buys, the waiting keep their
// places in the same order, a pass that bought before the loss stays used,
// and nothing is oversold. While the room is lost it answers 503, never
// "not in this voucher's line".
func TestRoomSurvivesRedisDataLoss(t *testing.T) {
	t.Parallel()
	ts, rdb := startSystemOnRedisDB(t, 12)
	ctx := context.Background()

	vid := ts.createRoomVoucher(t, 2, 1, 1, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	path := "/api/v1/vouchers/" + vid + "/queue"
	queue := func(tok string) answer { return ts.do(t, http.MethodGet, path, tok, nil, nil) }
	join := func(tok string) {
		j := ts.do(t, http.MethodPost, path, tok, nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
	}
	admitted := func(tok string) string {
		var pass string
		require.Eventually(t, func() bool {
			q := queue(tok)
			require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
			pass, _ = q.body["pass"].(string)
			return q.body["state"] == "admitted" && pass != ""
		}, 30*time.Second, 50*time.Millisecond)
		return pass
	}
	users := map[string]int64{"early": testUser(), "a": testUser(), "b": testUser(), "d": testUser()}
	toks := map[string]string{}
	for name, u := range users {
		toks[name] = ts.shopper(t, u)
	}

	// The early shopper is admitted and buys; then A, B and D join. One
	// unit is left, so the room lets out one pass (A's) and B and D wait.
	join(toks["early"])
	earlyPass := admitted(toks["early"])
	bought := ts.buyWithPass(t, vid, toks["early"], earlyPass, "early-1")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	for _, n := range []string{"a", "b", "d"} {
		join(toks[n])
	}
	passA := admitted(toks["a"])
	for i, n := range []string{"b", "d"} {
		q := queue(toks[n])
		require.Equal(t, "waiting", q.body["state"], "%s", q.raw)
		require.EqualValues(t, i+1, q.body["position"], "%s: %s", n, q.raw)
	}
	ts.waitPersisted(t, vid, 1)
	id, err := strconv.ParseInt(vid, 10, 64)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var places, admittedRows int
		err := ts.pool.QueryRow(ctx, `SELECT count(*), count(pass_expires_ms) FROM room_places WHERE voucher_id = $1`, id).
			Scan(&places, &admittedRows)
		require.NoError(t, err)
		return places == 4 && admittedRows == 2
	}, 30*time.Second, 50*time.Millisecond, "the line is copied to PostgreSQL")

	require.NoError(t, rdb.FlushDB(ctx).Err(), "Redis loses its data")

	// Until the healer is done (it waits for the messages in flight first)
	// the room says it is being restored, never that A is not in line or
	// that A's pass is not valid.
	gap := ts.buyWithPass(t, vid, toks["a"], passA, "a-gap")
	require.Equal(t, http.StatusServiceUnavailable, gap.status, "%s", gap.raw)
	require.NotEmpty(t, gap.header.Get("Retry-After"))
	var lostAnswers int
	require.Eventually(t, func() bool {
		q := queue(toks["a"])
		if q.status == http.StatusServiceUnavailable {
			lostAnswers++
			require.NotEmpty(t, q.header.Get("Retry-After"), "%s", q.raw)
			return false
		}
		require.Equal(t, http.StatusOK, q.status, "A's place is known again, or being restored: %s", q.raw)
		return true
	}, 90*time.Second, 100*time.Millisecond)
	require.Positive(t, lostAnswers, "the room was being restored for a while")
	t.Logf("the room answered 503 %d times while it was restored", lostAnswers)

	q := queue(toks["a"])
	require.Equal(t, "admitted", q.body["state"], "%s", q.raw)
	require.Equal(t, passA, q.body["pass"], "A's pass is the one A holds")
	for i, n := range []string{"b", "d"} {
		q := queue(toks[n])
		require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
		require.Equal(t, "waiting", q.body["state"], "%s", q.raw)
		require.EqualValues(t, i+1, q.body["position"], "%s keeps its place: %s", n, q.raw)
	}
	reused := ts.buyWithPass(t, vid, toks["early"], earlyPass, "early-2")
	require.Equal(t, "not_admitted", reused.errorCode(), "a pass that bought before the loss stays used: %s", reused.raw)

	buy := ts.buyWithPass(t, vid, toks["a"], passA, "a-1")
	require.Equal(t, http.StatusAccepted, buy.status, "A's unexpired pass buys after the loss: %s", buy.raw)
	ts.waitPersisted(t, vid, 2)
	require.EqualValues(t, 2, ts.checkInvariants(t, vid, 1), "nothing oversold")
}
