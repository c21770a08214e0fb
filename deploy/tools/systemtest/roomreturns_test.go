package systemtest

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/waitroom"
)

// roomShopperAt is one shopper of the returned-units test: their token and
// the gateway they use.
type roomShopperAt struct {
	user  int64
	token string
	gw    *testSystem
}

// place reads the shopper's place in voucherID's line.
func (s roomShopperAt) place(t *testing.T, voucherID string) answer {
	t.Helper()
	q := s.gw.do(t, http.MethodGet, "/api/v1/vouchers/"+voucherID+"/queue", s.token, nil, nil)
	require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	return q
}

// waitPlace reads the shopper's place until ok accepts it, for at most 30
// seconds, and returns it; it fails saying what the last read was.
func (s roomShopperAt) waitPlace(t *testing.T, voucherID string, ok func(q answer) bool, what string) answer {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q := s.place(t, voucherID)
		if ok(q) {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("user %d never %s; the last read of the place: %s", s.user, what, q.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inState is a waitPlace test: the place reads state.
func inState(state waitroom.State) func(answer) bool {
	return func(q answer) bool { return q.body["state"] == string(state) }
}

// TestRoomReturnedUnitsGoToTheLine: a waiting room sells out to shoppers
// who never pay. Those still in line keep their places and are told
// sold_out, not closed. When the holds time out (a short pay timeout), the
// units go to the next in line, exactly as many as came back and in line
// order; an outsider gets none of them (no pass, or a pass already used to
// buy a unit whose hold then timed out), and the first buyers' passes buy
// nothing again. Once every unit is paid for the room closes. Two gateways
// share the work (joins, reads and buys alternate), on a voucher of one
// Redis bucket and on one of three, on both Redis shapes.
func TestRoomReturnedUnitsGoToTheLine(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testRoomReturnedUnitsGoToTheLine)
}

func testRoomReturnedUnitsGoToTheLine(t *testing.T, env map[string]string) {
	// Long enough that the first buyers' holds never time out before the
	// last of them has bought and the line has been read sold out, on a
	// loaded machine; short enough to wait for.
	env["SECKILL_PAY_TIMEOUT"] = "8s"
	a := startSystem(t, env)
	b := a.startPeer(t, gatewayOnly)
	gws := []*testSystem{a, b.testSystem}
	for _, shards := range []int{1, 3} {
		t.Run("shards="+strconv.Itoa(shards), func(t *testing.T) {
			t.Parallel() // each waits for its holds to time out: together
			testRoomReturnedUnits(t, gws, shards)
		})
	}

	// Without a room, a returned unit is simply on sale again.
	t.Run("no room", func(t *testing.T) {
		t.Parallel()
		plain := a.createVoucher(t, 1, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
		first := a.buy(t, plain, a.shopper(t, testUser()), 1, "")
		require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
		a.waitCatalogStock(t, plain, 0)
		a.waitCatalogStock(t, plain, 1) // the hold timed out
		b.waitCatalogStock(t, plain, 1) // and the other gateway knows
		next := b.buy(t, plain, b.shopper(t, testUser()), 1, "")
		require.Equal(t, http.StatusAccepted, next.status, "%s", next.raw)
		a.waitPersisted(t, plain, 2)
		a.checkInvariants(t, plain, 1)
	})
}

func testRoomReturnedUnits(t *testing.T, gws []*testSystem, shards int) {
	a := gws[0]
	const stock, inLine = 4, 11
	c := a.do(t, http.MethodPost, "/api/v1/admin/vouchers", a.cfg.AdminToken, map[string]any{
		"title": "returns", "kind": "seckill", "price_cents": 250, "stock": stock, "per_user_limit": 1,
		"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano),
		"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"shards":   shards, "waiting_room": map[string]any{"admit_per_second": 20, "prequeue_seconds": 0},
	}, nil)
	require.Equal(t, http.StatusCreated, c.status, "%s", c.raw)
	vid := c.body["id"].(string)
	path := "/api/v1/vouchers/" + vid + "/queue"

	// Joined one after the other after begin_at: line order is join order.
	line := make([]roomShopperAt, inLine)
	for i := range line {
		u := testUser()
		line[i] = roomShopperAt{user: u, token: a.shopper(t, u), gw: gws[i%2]}
		j := line[i].gw.do(t, http.MethodPost, path, line[i].token, nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
	}

	// buyWhenAdmitted waits for shopper i's pass and buys with it.
	// The pass's expiry is its admission step's time plus the pass's
	// lifetime: it tells the order of admission.
	type bought struct {
		order, pass, key string
		expires          time.Time
	}
	buyWhenAdmitted := func(i int) bought {
		t.Helper()
		s := line[i]
		q := s.waitPlace(t, vid, func(q answer) bool {
			return q.body["state"] == string(waitroom.StateAdmitted) && q.body["pass"] != nil
		}, "admitted (place "+strconv.Itoa(i+1)+")")
		pass, _ := q.body["pass"].(string)
		exp, _ := q.body["pass_expires_at"].(string)
		expires, err := time.Parse(time.RFC3339Nano, exp)
		require.NoError(t, err)
		key := "returns-" + strconv.Itoa(i)
		r := s.gw.buyWithPass(t, vid, s.token, pass, key)
		require.Equal(t, http.StatusAccepted, r.status, "shopper %d: %s", i, r.raw)
		t.Logf("place %d admitted (pass expires %s), bought order %s", i+1, expires.Format("15:04:05.000"), r.body["order_id"])
		return bought{order: r.body["order_id"].(string), pass: pass, key: key, expires: expires}
	}
	// soldOutFrom waits until every shopper from `from` on reads sold_out,
	// in the places they had: nobody behind was admitted.
	soldOutFrom := func(from int) {
		t.Helper()
		for i := from; i < inLine; i++ {
			q := line[i].waitPlace(t, vid, inState(waitroom.StateSoldOut), "told sold_out (place "+strconv.Itoa(i+1)+")")
			require.EqualValues(t, i-from+1, q.body["position"], "shopper %d keeps the place: %s", i, q.raw)
			require.Nil(t, q.body["pass"], "%s", q.raw)
		}
	}

	// The first stock shoppers buy and never pay; the rest are told
	// sold_out and keep their places.
	first := make([]bought, stock)
	for i := range stock {
		first[i] = buyWhenAdmitted(i)
	}
	soldOutFrom(stock)

	// The holds time out: the sweeper cancels them and the units go back
	// on sale, where only the line can take them.
	for i, f := range first {
		line[i].gw.waitStatus(t, line[i].token, f.order, "cancelled")
	}
	t.Logf("the %d unpaid holds timed out: their units are back", stock)
	a.waitCatalogStock(t, vid, stock)
	outsider := a.shopper(t, testUser())
	for j, gw := range gws {
		none := gw.buy(t, vid, outsider, 1, "")
		require.Equal(t, http.StatusForbidden, none.status, "an outsider buys no returned unit: %s", none.raw)
		require.Equal(t, "not_admitted", none.errorCode())
		keyed := gw.buy(t, vid, outsider, 1, "outsider-"+strconv.Itoa(j))
		require.Equal(t, "not_admitted", keyed.errorCode(), "%s", keyed.raw)
	}
	for i := range stock {
		// The first buyers' passes: a new key is refused, the old key
		// replays the cancelled order and holds nothing new.
		s, f := line[i], first[i]
		again := s.gw.buyWithPass(t, vid, s.token, f.pass, "returns-again-"+strconv.Itoa(i))
		require.Equal(t, http.StatusForbidden, again.status, "a used pass buys no returned unit: %s", again.raw)
		replay := s.gw.buyWithPass(t, vid, s.token, f.pass, f.key)
		require.Equal(t, http.StatusAccepted, replay.status, "%s", replay.raw)
		require.Equal(t, f.order, replay.body["order_id"], "the replay is the first order, not a new hold")
	}
	require.EqualValues(t, stock, a.stockLeft(t, vid), "nobody outside the line took a returned unit")

	// Exactly the next stock shoppers in line get them, and buy; this time
	// they pay. Those behind are sold out again, their places kept.
	second := make([]bought, stock)
	for i := range stock {
		second[i] = buyWhenAdmitted(stock + i)
	}
	soldOutFrom(2 * stock)
	for i := range second {
		prev := first[stock-1].expires
		if i > 0 {
			prev = second[i-1].expires
		}
		require.False(t, second[i].expires.Before(prev), "place %d admitted before place %d: not in line order", stock+i+1, stock+i)
	}
	require.True(t, second[0].expires.After(first[stock-1].expires), "the units back were admitted to after the sell-out")

	for i, sb := range second {
		s := line[stock+i]
		s.gw.waitStatus(t, s.token, sb.order, "created")
		p := s.gw.do(t, http.MethodPost, "/api/v1/orders/"+sb.order+"/pay", s.token, nil, nil)
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
	}
	// Every unit paid for: the sale cannot sell more, and the line closes.
	for i := 2 * stock; i < inLine; i++ {
		line[i].waitPlace(t, vid, inState(waitroom.StateClosed), "told closed (place "+strconv.Itoa(i+1)+")")
	}

	a.waitPersisted(t, vid, 2*stock)
	require.Equal(t, int64(stock), a.checkInvariants(t, vid, 1), "no oversell: the stock sold once, then its returns once")
	for i := range line {
		want := map[string]int{}
		switch {
		case i < stock:
			want["cancelled"] = 1
		case i < 2*stock:
			want["paid"] = 1
		}
		require.Equal(t, want, a.userOrders(t, vid, line[i].user), "shopper %d", i)
	}
	st := a.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", a.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, st.status, "%s", st.raw)
	q := st.body["queue"].(map[string]any)
	require.EqualValues(t, 2*stock, q["admitted"], "admitted: the first buyers, then exactly as many as came back")
	require.EqualValues(t, 2*stock, q["passes_used"])
	require.EqualValues(t, 0, q["waiting"])
}
