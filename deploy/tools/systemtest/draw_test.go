package systemtest

import (
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// drandEnv points a system at the package's private drand network.
func drandEnv(t *testing.T) map[string]string {
	d := stack.Drand(t)
	hash, err := d.ChainHash(t.Context())
	require.NoError(t, err)
	return map[string]string{"SECKILL_DRAND_URLS": d.URL, "SECKILL_DRAND_CHAIN_HASH": hash}
}

// TestDrawEndToEnd: a voucher sold by draw on two gateways. The beacon
// round is committed to when the voucher is made; shoppers enter on one
// gateway, each with an entry id; an entry after begin_at is refused; once
// the round is out one draw is made whichever gateway draws, and each
// shopper reads won (with the pass, which buys) or waitlisted, with a
// ticket that follows from the round's signature and tells the result
// against the cut-off; a shopper's socket on the other gateway is pushed
// the result; the operator's export lists every entry.
func TestDrawEndToEnd(t *testing.T) {
	t.Parallel()
	a := startSystem(t, drandEnv(t))
	b := a.startPeer(t, gatewayOnly)
	begin := time.Now().Add(4 * time.Second)
	created := a.createDrawVoucher(t, 2, begin)
	vid := created.body["id"].(string)
	room := created.body["waiting_room"].(map[string]any)
	assert.Equal(t, "draw", room["mode"])
	assert.EqualValues(t, 600, room["draw_pass_seconds"])
	made := created.body["draw"].(map[string]any)
	committed, _ := made["beacon"].(map[string]any)
	require.NotNil(t, committed, "the voucher commits to a round when it is made: %s", created.raw)
	assert.Nil(t, committed["signature"])
	roundAt, err := time.Parse(time.RFC3339, committed["round_at"].(string))
	require.NoError(t, err)
	assert.True(t, roundAt.After(begin), "the round comes after begin_at")
	assert.Nil(t, made["seed"])
	assert.Nil(t, made["commitment"])

	voucher := func() map[string]any {
		return a.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["draw"].(map[string]any)
	}
	const entrants = 5
	toks := make([]string, entrants)
	entryOf := map[string]string{}
	path := "/api/v1/vouchers/" + vid + "/queue"
	for i := range toks {
		toks[i] = a.shopper(t, testUser())
		e := a.do(t, http.MethodPost, path, toks[i], nil, nil)
		require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
		assert.Equal(t, string(waitroom.StateEntered), e.body["state"])
		entryOf[toks[i]], _ = e.body["entry_id"].(string)
		require.Len(t, entryOf[toks[i]], 32, "the entrant gets an entry id: %s", e.raw)
	}
	// Every entrant's page is open on B.
	socks := make([]*wsClient, entrants)
	for i, tok := range toks {
		socks[i] = b.openWS(t, tok)
		socks[i].untilPong(t)
	}
	watcher := socks[entrants-1]
	export := a.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/draw/entries", a.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusConflict, export.status, "not drawn yet: %s", export.raw)
	list := a.do(t, http.MethodGet, "/api/v1/vouchers/"+vid+"/draw/entries", "", nil, nil)
	require.Equal(t, http.StatusConflict, list.status, "no entry list before the draw: %s", list.raw)

	time.Sleep(time.Until(begin) + 100*time.Millisecond)
	late := a.do(t, http.MethodPost, path, a.shopper(t, testUser()), nil, nil)
	require.Equal(t, http.StatusConflict, late.status, "an entry after begin_at: %s", late.raw)
	assert.Equal(t, "ended", late.errorCode())

	signed := func() string {
		bc, _ := voucher()["beacon"].(map[string]any)
		s, _ := bc["signature"].(string)
		return s
	}
	deadline := time.Now().Add(20 * time.Second)
	for signed() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	d := voucher()
	sig, err := hex.DecodeString(signed())
	require.NoError(t, err, "the round's signature is published at the draw")
	randomness := sha256.Sum256(sig)
	cutoff := d["cutoff"].(string)
	assert.EqualValues(t, entrants, d["entries"])
	require.Len(t, d["commitments"], 2, "the beacon and the entries hash, once each")

	// The watcher's page is pushed the voucher with the signature: its cue
	// to read the result.
	for seen := false; !seen; {
		select {
		case f := <-watcher.vouchers:
			if f.Voucher != nil && f.Voucher.ID == vid && f.Voucher.Draw != nil && f.Voucher.Draw.Beacon != nil &&
				f.Voucher.Draw.Beacon.Signature != nil {
				assert.Equal(t, hex.EncodeToString(sig), *f.Voucher.Draw.Beacon.Signature)
				seen = true
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no voucher frame with the signature within 30s")
		}
	}

	won, waitlisted := 0, 0
	var pass, buyer string
	last := -1 // the last on the waitlist
	id, _ := strconv.ParseInt(vid, 10, 64)
	for i, tok := range toks {
		q := b.do(t, http.MethodGet, path, tok, nil, nil)
		require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
		ticket := q.body["ticket"].(string)
		assert.Equal(t, entryOf[tok], q.body["entry_id"])
		assert.Equal(t, draw.TicketOf(randomness, id, entryOf[tok]).String(), ticket, "the ticket follows from the round")
		switch q.body["state"] {
		case string(waitroom.StateWon):
			won++
			assert.LessOrEqual(t, ticket, cutoff)
			require.NotNil(t, q.body["pass"])
			if pass == "" {
				pass, buyer = q.body["pass"].(string), tok
			}
		case string(waitroom.StateWaitlisted):
			waitlisted++
			assert.Greater(t, ticket, cutoff)
			assert.Positive(t, q.body["position"])
			if q.body["position"] == float64(entrants-2) {
				last = i
			}
		default:
			t.Fatalf("entrant %d: %s", i, q.raw)
		}
	}
	assert.Equal(t, 2, won)
	assert.Equal(t, entrants-2, waitlisted)
	require.GreaterOrEqual(t, last, 0)

	resp := a.rawGet(t, "/api/v1/admin/vouchers/"+vid+"/draw/entries", a.cfg.AdminToken)
	rows, err := csv.NewReader(strings.NewReader(resp)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, entrants+1)
	assert.Equal(t, []string{"user_id", "ticket", "result"}, rows[0])
	for i, r := range rows[1:] {
		assert.Equal(t, i < 2, r[2] == "won", "row %d", i)
		if i > 0 {
			assert.Less(t, rows[i][1], r[1], "in ticket order")
		}
	}

	// A winner buys, then cancels: the unit goes to the next on the
	// waitlist, and the last, watching on B, is pushed its new place.
	bought := a.buyWithPass(t, vid, buyer, pass, "")
	require.Equal(t, http.StatusAccepted, bought.status, "a winner buys: %s", bought.raw)
	order := bought.body["order_id"].(string)
	a.waitStatus(t, buyer, order, "created")
	// (While the buy's reservation was on its way a step may have let in
	// one more: the place is read again, as the page would.)
	before := b.do(t, http.MethodGet, path, toks[last], nil, nil)
	require.Equal(t, string(waitroom.StateWaitlisted), before.body["state"], "%s", before.raw)
	cancelled := a.do(t, http.MethodPost, "/api/v1/orders/"+order+"/cancel", buyer, nil, nil)
	require.Equal(t, http.StatusOK, cancelled.status, "%s", cancelled.raw)
	moved := socks[last].nextQueue(t)
	for moved.Position == int64(before.body["position"].(float64)) {
		moved = socks[last].nextQueue(t) // the push of that extra step, read already
	}
	assert.Equal(t, string(waitroom.StateWaitlisted), moved.State)
	assert.EqualValues(t, before.body["position"].(float64)-1, moved.Position, "the waitlist moved up by one")
}

// createDrawVoucher makes a seckill voucher of stock units, one a shopper,
// sold by a draw at begin whose entries opened a minute before.
func (ts *testSystem) createDrawVoucher(t *testing.T, stock int, begin time.Time) answer {
	t.Helper()
	created := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "draw voucher", "kind": "seckill", "price_cents": 250, "stock": stock, "per_user_limit": 1,
		"begin_at": begin.UTC().Format(time.RFC3339Nano), "end_at": begin.Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 10, "prequeue_seconds": 60, "mode": "draw"},
	}, nil)
	require.Equal(t, http.StatusCreated, created.status, "%s", created.raw)
	return created
}

// rawGet is the body of a GET that answers 200 with something else than
// JSON.
func (ts *testSystem) rawGet(t *testing.T, path, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
	return string(raw)
}

// TestPatchEndMovesTheDrawKeys: the operator moves a draw's end later
// (PATCH end_at); the draw's entries key follows it, as the stock's and the
// room's keys do, so the entries outlive the old end.
func TestPatchEndMovesTheDrawKeys(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, drandEnv(t))
	begin := time.Now().Add(time.Hour)
	created := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "draw voucher", "kind": "seckill", "price_cents": 250, "stock": 5, "per_user_limit": 1,
		"begin_at": begin.UTC().Format(time.RFC3339), "end_at": begin.Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 10, "prequeue_seconds": 7200, "mode": "draw"},
	}, nil)
	require.Equal(t, http.StatusCreated, created.status, "%s", created.raw)
	vid := created.body["id"].(string)
	e := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", ts.shopper(t, testUser()), nil, nil)
	require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
	key := draw.EntriesKey(mustID(t, vid))
	before, err := ts.rdb.PTTL(t.Context(), key).Result()
	require.NoError(t, err)
	require.Positive(t, before)

	later := begin.Add(10 * time.Hour)
	p := ts.do(t, http.MethodPatch, "/api/v1/admin/vouchers/"+vid, ts.cfg.AdminToken,
		map[string]any{"end_at": later.UTC().Format(time.RFC3339)}, nil)
	require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
	require.Eventually(t, func() bool {
		after, err := ts.rdb.PTTL(t.Context(), key).Result()
		return err == nil && after > before+8*time.Hour
	}, 10*time.Second, 100*time.Millisecond, "the draw's keys live until the new end plus the grace")
}

// TestLostEntriesMakeADrawVoid: Redis loses a draw's entries in the entry
// window. The draw is void, visibly: the voucher says so with the reason,
// an entrant's queue reads void, a newcomer is not entered (the answer is
// void too), and nothing is drawn at begin_at.
func TestLostEntriesMakeADrawVoid(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, drandEnv(t))
	begin := time.Now().Add(5 * time.Second)
	vid := ts.createDrawVoucher(t, 2, begin).body["id"].(string)
	path := "/api/v1/vouchers/" + vid + "/queue"
	tok := ts.shopper(t, testUser())
	e := ts.do(t, http.MethodPost, path, tok, nil, nil)
	require.Equal(t, http.StatusOK, e.status, "%s", e.raw)
	require.NoError(t, ts.rdb.Del(t.Context(), draw.EntriesKey(mustID(t, vid))).Err())

	voucher := func() map[string]any {
		return ts.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["draw"].(map[string]any)
	}
	require.Eventually(t, func() bool { return voucher()["void"] == true }, 10*time.Second, 100*time.Millisecond,
		"the draw turns void once the loss is certain")
	assert.Contains(t, voucher()["void_reason"], "lost")
	q := ts.do(t, http.MethodGet, path, tok, nil, nil)
	require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	assert.Equal(t, "void", q.body["state"])
	late := ts.do(t, http.MethodPost, path, ts.shopper(t, testUser()), nil, nil)
	require.Equal(t, http.StatusOK, late.status, "%s", late.raw)
	assert.Equal(t, "void", late.body["state"], "a newcomer is not entered: the draw is void for everyone")
	assert.Nil(t, late.body["entry_id"])

	time.Sleep(time.Until(begin) + 2*time.Second)
	d := voucher()
	assert.Equal(t, true, d["void"])
	assert.Nil(t, d["entries_hash"], "a void draw never freezes other entries")
	bc, _ := d["beacon"].(map[string]any)
	assert.Nil(t, bc["signature"], "nor is it drawn")
}
