package systemtest

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// createRoomVoucher makes a seckill voucher with a waiting room.
func (ts *testSystem) createRoomVoucher(t *testing.T, stock, limit, rate, prequeue int, begin, end time.Time) string {
	t.Helper()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "room voucher", "kind": "seckill", "price_cents": 250, "stock": stock,
		"per_user_limit": limit, "begin_at": begin.UTC().Format(time.RFC3339Nano), "end_at": end.UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": rate, "prequeue_seconds": prequeue},
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	return a.body["id"].(string)
}

// nextQueue returns the next queue frame on c, skipping order frames.
func (c *wsClient) nextQueue(t *testing.T) api.Queue {
	t.Helper()
	for {
		f := c.next(t)
		if f.Type != api.FrameQueue {
			continue
		}
		require.NotNil(t, f.Queue, "%s", f.raw)
		return *f.Queue
	}
}

func (ts *testSystem) buyWithPass(t *testing.T, voucherID, token, pass, key string) answer {
	t.Helper()
	h := map[string]string{"Seckill-Pass": pass}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+voucherID+"/orders", token, map[string]any{"quantity": 1}, h)
}

// TestWaitingRoomEndToEnd: two gateways on one fleet. Shoppers join the
// line on one and watch their place on the other's sockets: the place is
// pushed as the line moves, then the pass at admission. Buying takes the
// pass: missing, forged, borrowed and reused passes are 403 not_admitted
// before any stock is touched; a retry with the same Idempotency-Key replays
// the order. When the stock is all held those left are told sold_out and
// keep their places; once every unit is paid for the room closes for
// everyone left, and the operator's stats count it all.
func TestWaitingRoomEndToEnd(t *testing.T) {
	t.Parallel()
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	const stock, waiting = 3, 8
	vid := a.createRoomVoucher(t, stock, 1, 2, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	users := make([]int64, waiting)
	toks := make([]string, waiting)
	sockets := make([]*wsClient, waiting)
	for i := range users {
		users[i] = testUser()
		toks[i] = a.shopper(t, users[i])
		sockets[i] = b.openWS(t, toks[i])
		sockets[i].untilPong(t)
	}
	path := "/api/v1/vouchers/" + vid + "/queue"
	nobody := a.do(t, http.MethodGet, path, toks[0], nil, nil)
	require.Equal(t, http.StatusNotFound, nobody.status, "not in line: %s", nobody.raw)
	for i := range users {
		j := a.do(t, http.MethodPost, path, toks[i], nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
		require.Equal(t, vid, j.body["voucher_id"])
	}
	again := a.do(t, http.MethodPost, path, toks[waiting-1], nil, nil)
	require.Equal(t, http.StatusOK, again.status)
	if again.body["state"] == "waiting" {
		require.EqualValues(t, again.body["position"], float64(again.body["ahead"].(float64)+1))
	}

	// No pass, a forged one: refused before any stock moves.
	before := a.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["stock_left"]
	none := a.buy(t, vid, toks[waiting-1], 1, "")
	require.Equal(t, http.StatusForbidden, none.status, "%s", none.raw)
	require.Equal(t, "not_admitted", none.errorCode())
	forged := a.buyWithPass(t, vid, toks[waiting-1], "p1."+vid+"."+strconv.FormatInt(users[waiting-1], 10)+".99999999999999.forged", "")
	require.Equal(t, "not_admitted", forged.errorCode(), "%s", forged.raw)

	// The last in line is told its place on B's socket, and sees it move
	// whenever the line still has passes to give: nobody has bought yet, so
	// the room admits the first stock shoppers and then waits for buys. On
	// a busy machine those admissions may all be done before the last
	// joins; its place then stays until the stock is gone.
	first := sockets[waiting-1].nextQueue(t)
	require.EqualValues(t, waitroom.StateWaiting, first.State)
	require.Equal(t, first.Position-1, first.Ahead)
	require.Positive(t, first.ETASeconds)
	if first.Position > waiting-stock {
		moved := sockets[waiting-1].nextQueue(t)
		require.EqualValues(t, waitroom.StateWaiting, moved.State)
		require.Equal(t, moved.Position-1, moved.Ahead)
		require.Less(t, moved.Position, first.Position)
	} else {
		t.Logf("all %d passes were out before the last in line joined (place %d): no move to watch", stock, first.Position)
	}

	// The first is admitted: the pass arrives on its socket.
	var pass string
	for pass == "" {
		q := sockets[0].nextQueue(t)
		if waitroom.State(q.State) == waitroom.StateAdmitted {
			require.NotNil(t, q.Pass)
			require.True(t, q.PassExpiresAt.After(time.Now()))
			pass = *q.Pass
		}
	}
	borrowed := a.buyWithPass(t, vid, toks[waiting-1], pass, "")
	require.Equal(t, "not_admitted", borrowed.errorCode(), "someone else's pass: %s", borrowed.raw)
	require.Equal(t, before, a.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["stock_left"])

	bought := a.buyWithPass(t, vid, toks[0], pass, "room-1")
	require.Equal(t, http.StatusAccepted, bought.status, "%s", bought.raw)
	replay := b.buyWithPass(t, vid, toks[0], pass, "room-1")
	require.Equal(t, http.StatusAccepted, replay.status, "the same buy again: %s", replay.raw)
	require.Equal(t, bought.body["order_id"], replay.body["order_id"])
	reused := b.buyWithPass(t, vid, toks[0], pass, "room-2")
	require.Equal(t, "not_admitted", reused.errorCode(), "a pass is used once: %s", reused.raw)

	// Everyone else buys when admitted, until the stock is gone; then those
	// still waiting keep their places and are told sold_out (the holds are
	// unpaid: units may come back). Once every unit is paid for, the room
	// closes for everyone left.
	sold := 1
	paying := map[string]string{bought.body["order_id"].(string): toks[0]}
	states := map[int]waitroom.State{0: waitroom.StateAdmitted}
	deadline := time.Now().Add(30 * time.Second)
	for i := 1; i < waiting; i++ {
		for states[i] != waitroom.StateSoldOut && states[i] != waitroom.StateAdmitted {
			require.True(t, time.Now().Before(deadline), "user %d never admitted nor told sold out", i)
			q := sockets[i].nextQueue(t)
			state := waitroom.State(q.State)
			require.NotEqual(t, waitroom.StateClosed, state, "user %d: closed while the holds are unpaid", i)
			states[i] = state
			switch state {
			case waitroom.StateAdmitted:
				r := a.buyWithPass(t, vid, toks[i], *q.Pass, "")
				switch r.status {
				case http.StatusAccepted:
					sold++
					paying[r.body["order_id"].(string)] = toks[i]
				default:
					require.Equal(t, "sold_out", r.errorCode(), "%s", r.raw)
				}
			case waitroom.StateSoldOut:
				require.Positive(t, q.Position, "user %d keeps a place", i)
				require.Equal(t, q.Position-1, q.Ahead)
				require.Nil(t, q.Pass)
			}
		}
	}
	require.Equal(t, stock, sold)
	require.Equal(t, waitroom.StateSoldOut, states[waiting-1], "the last in line keeps the place once the stock is all held")
	a.waitPersisted(t, vid, stock)
	a.checkInvariants(t, vid, 1)

	st := a.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", a.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, st.status, "%s", st.raw)
	q, ok := st.body["queue"].(map[string]any)
	require.True(t, ok, "stats carry the queue: %s", st.raw)
	require.EqualValues(t, stock, q["passes_used"])
	require.GreaterOrEqual(t, q["admitted"], float64(stock))
	require.Positive(t, q["waiting"], "sold out: the line still waits")

	for id, tok := range paying {
		a.waitStatus(t, tok, id, "created")
		p := a.do(t, http.MethodPost, "/api/v1/orders/"+id+"/pay", tok, nil, nil)
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
	}
	for {
		require.True(t, time.Now().Before(deadline.Add(30*time.Second)), "the last in line never told closed")
		if q := sockets[waiting-1].nextQueue(t); waitroom.State(q.State) == waitroom.StateClosed {
			break
		}
	}
	st = a.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", a.cfg.AdminToken, nil, nil)
	require.EqualValues(t, 0, st.body["queue"].(map[string]any)["waiting"], "every unit paid for: the room closed, nobody waits")

	// A voucher without a room has no line.
	plain := a.createVoucher(t, 1, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	r := a.do(t, http.MethodPost, "/api/v1/vouchers/"+plain+"/queue", toks[0], nil, nil)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.raw)
}
