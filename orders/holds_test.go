package orders_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/orders/payment/stripepay"
	"github.com/flashsale/seckill/orders/payment/stripepay/stripetest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/draw"
)

func newHolds(t testing.TB, e *payEnv) *orders.Holds {
	t.Helper()
	return orders.NewHolds(orders.HoldsConfig{Record: e.store, Authorizer: e.stripe, Provider: stripepay.Name, Log: testLog(t)})
}

func (e *payEnv) holdStates(t testing.TB) map[orders.HoldState]int {
	t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT state, count(*) FROM draw_holds WHERE voucher_id = $1 GROUP BY state`, e.v.ID)
	require.NoError(t, err)
	defer rows.Close()
	out := map[orders.HoldState]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[orders.HoldState(s)] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// A draw with holds against Stripe's SDK and a real stripe-mock: 40
// entrants each enter twice at once (one hold each, of price × limit); 10
// winners buy and their holds are captured by several callers at once while
// several sweepers release everyone else's but the 15 winners'; then the 5
// winners who never bought are released once their passes are gone.
// Every hold ends captured or released exactly once.
func TestDrawHoldsCaptureWinnersReleaseTheRest(t *testing.T) {
	const entrants, buyers, winners, limit = 40, 10, 15, 2
	e := newPayEnv(t, 100, time.Hour, stack.StripeMock(t))
	e.v.PerUserLimit = limit // as the voucher was made (newLifeEnv's limit)
	holds := newHolds(t, e)

	var wg sync.WaitGroup
	got := make([][2]orders.Hold, entrants)
	for u := range entrants {
		for k := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := holds.Enter(e.ctx, e.v, int64(u+1))
				assert.NoError(t, err)
				got[u][k] = h
			}()
		}
	}
	wg.Wait()
	ids := map[string]bool{}
	for u, pair := range got {
		require.Equal(t, pair[0].PaymentID, pair[1].PaymentID, "entering again keeps the hold")
		h, err := e.store.HoldOf(e.ctx, e.v.ID, int64(u+1))
		require.NoError(t, err)
		require.Equal(t, orders.HoldHeld, h.State)
		require.Equal(t, e.v.PriceCents*limit, h.AmountCents, "price × per_user_limit")
		require.NotEmpty(t, h.ClientSecret, "the page confirms the hold with it")
		ids[h.PaymentID] = true
	}
	require.Len(t, ids, entrants, "one hold per entrant")

	rs := e.buy(t, buyers, 1) // users 1..buyers buy one unit each
	keep := make([]int64, winners)
	for i := range keep {
		keep[i] = int64(i + 1)
	}
	var captured, released atomic.Int64
	for range 6 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for _, r := range rs {
				o, err := e.store.Order(e.ctx, r.OrderID)
				if !assert.NoError(t, err) {
					return
				}
				_, ok, err := holds.Capture(e.ctx, o)
				assert.NoError(t, err)
				if ok {
					captured.Add(1)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for {
				n, err := holds.Release(e.ctx, e.v.ID, keep, 7)
				released.Add(int64(n))
				if !assert.NoError(t, err) || n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(buyers), captured.Load(), "each buyer's hold captured once")
	require.Equal(t, int64(entrants-winners), released.Load(), "each loser's hold released once")
	require.Equal(t, map[orders.HoldState]int{orders.HoldCaptured: buyers, orders.HoldHeld: winners - buyers,
		orders.HoldReleased: entrants - winners}, e.holdStates(t))

	for _, r := range rs {
		o, err := e.store.Order(e.ctx, r.OrderID)
		require.NoError(t, err)
		require.Equal(t, orders.StatusPaid, o.Status)
		require.NotNil(t, o.Payment)
		require.Equal(t, payment.StatusSucceeded, o.Payment.Status)
		require.Equal(t, o.AmountCents, o.Payment.AmountCents, "the order's amount is taken, not the whole hold")
		var n int
		require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM payments WHERE order_id = $1`, o.ID).Scan(&n))
		require.Equal(t, 1, n, "one payment per order")
		_, ok, err := holds.Capture(e.ctx, o)
		require.NoError(t, err)
		require.False(t, ok, "a captured hold is not captured again")

		// Stripe's word of the capture names what was received: nothing
		// more to do.
		pi := stripetest.PaymentIntent(o.Payment.ID, 0, e.v.PriceCents*limit, "cny", "succeeded")
		pi["amount_received"] = o.AmountCents
		out, err := e.deliver(t, stripetest.Sign(stripetest.Event("evt_cap_"+o.Payment.ID, "payment_intent.succeeded", pi),
			stripetest.Secret, time.Now()))
		require.NoError(t, err)
		require.Equal(t, orders.EventStale, out.Result)
	}

	// The winners' passes expired unused: their holds go too, once.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := holds.Release(e.ctx, e.v.ID, nil, 100)
			assert.NoError(t, err)
			released.Add(int64(n))
		}()
	}
	wg.Wait()
	require.Equal(t, int64(entrants-buyers), released.Load())
	require.Equal(t, map[orders.HoldState]int{orders.HoldCaptured: buyers, orders.HoldReleased: entrants - buyers}, e.holdStates(t))
	e.check(t)
}

// A buyer without a hold, or with a released one, is not captured; money
// captured for an order cancelled meanwhile is owed back.
func TestDrawHoldsCaptureOnlyHeld(t *testing.T) {
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	rs := e.buy(t, 2, 1)
	o1, err := e.store.Order(e.ctx, rs[0].OrderID)
	require.NoError(t, err)
	_, ok, err := holds.Capture(e.ctx, o1)
	require.NoError(t, err)
	require.False(t, ok, "no hold, nothing captured")

	_, err = holds.Enter(e.ctx, e.v, o1.UserID)
	require.NoError(t, err)
	n, err := holds.Release(e.ctx, e.v.ID, nil, 10)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a created order's hold is kept for its capture")

	_, err = holds.Enter(e.ctx, e.v, 3)
	require.NoError(t, err)
	n, err = holds.Release(e.ctx, e.v.ID, []int64{1}, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	rv := e.reserve(t, 3, 1)
	require.NoError(t, e.worker.Handle(e.ctx, []seckill.Reservation{rv}))
	o3, err := e.store.Order(e.ctx, rv.OrderID)
	require.NoError(t, err)
	_, ok, err = holds.Capture(e.ctx, o3)
	require.NoError(t, err)
	require.False(t, ok, "a released hold is not captured")
	o3, err = e.store.Order(e.ctx, o3.ID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusCreated, o3.Status, "its buyer pays as anyone does")

	// Cancelled between the claim and the record: the money is owed back.
	o2, err := e.store.Order(e.ctx, rs[1].OrderID)
	require.NoError(t, err)
	h, err := holds.Enter(e.ctx, e.v, o2.UserID)
	require.NoError(t, err)
	claimed, ok, err := e.store.ClaimCapture(e.ctx, o2)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, h.PaymentID, claimed.PaymentID)
	_, err = e.pool.Exec(e.ctx, `UPDATE orders SET status = 'cancelled' WHERE id = $1`, o2.ID)
	require.NoError(t, err)
	after, err := e.store.Captured(e.ctx, claimed, o2)
	require.NoError(t, err)
	require.Equal(t, orders.StatusCancelled, after.Status)
	owed, err := e.store.RefundsOwed(e.ctx, 100)
	require.NoError(t, err)
	found := false
	for _, p := range owed {
		found = found || p.ID == h.PaymentID
	}
	require.True(t, found, "captured money of a cancelled order is owed back")
}

// A claim whose asker died is taken over after a minute and asked again
// with the same idempotency key; a fresh claim is not.
func TestDrawHoldsStaleClaimTakenOver(t *testing.T) {
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	_, err := holds.Enter(e.ctx, e.v, 7)
	require.NoError(t, err)
	list, err := e.store.ClaimRelease(e.ctx, e.v.ID, nil, 10)
	require.NoError(t, err)
	require.Len(t, list, 1) // and its asker dies here
	n, err := holds.Release(e.ctx, e.v.ID, nil, 10)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a fresh claim is its asker's")
	_, err = e.pool.Exec(e.ctx, `UPDATE draw_holds SET claimed_at = now() - interval '2 minutes' WHERE voucher_id = $1`, e.v.ID)
	require.NoError(t, err)
	n, err = holds.Release(e.ctx, e.v.ID, nil, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a stale claim is taken over")
	require.Equal(t, map[orders.HoldState]int{orders.HoldReleased: 1}, e.holdStates(t))
}

// Settling a drawn voucher: the losers' holds go right after the draw, by
// several sweepers at once, each once; a winner who buys is captured by the
// sweep; the
// winners who did not buy are released once their passes expired.
func TestDrawHoldsSettleAfterTheDraw(t *testing.T) {
	const entrants, winners = 10, 4
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	n, err := holds.Settle(e.ctx, time.Now(), 100)
	require.NoError(t, err)
	require.Equal(t, 0, n, "nothing is released before the draw")

	entries := make([]draw.Entry, entrants)
	for i := range entries {
		_, err := holds.Enter(e.ctx, e.v, int64(i+1))
		require.NoError(t, err)
		entries[i] = draw.Entry{EntryID: fmt.Sprintf("%032x", i+1), UserID: int64(i + 1)}
	}
	require.NoError(t, e.store.SaveEntries(e.ctx, e.v.ID, entries))
	sig := bytes.Repeat([]byte{0xab}, 48)
	r := draw.RandomnessOf(sig)
	for i := range entries {
		entries[i].Ticket = draw.TicketOf(r, e.v.ID, entries[i].EntryID)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Ticket.String() < entries[j].Ticket.String() })
	require.NoError(t, e.store.EndDraw(e.ctx, e.v.ID, draw.State{Signature: hex.EncodeToString(sig),
		Entries: entrants, Winners: winners, Cutoff: entries[winners-1].Ticket.String()}))
	drawnAt := time.Now()

	buyer := entries[0].UserID
	rv := e.reserve(t, buyer, 1)
	require.NoError(t, e.worker.Handle(e.ctx, []seckill.Reservation{rv}))

	var released atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := holds.Settle(e.ctx, drawnAt, 2)
			assert.NoError(t, err)
			released.Add(int64(n))
		}()
	}
	wg.Wait()
	for {
		n, err := holds.Settle(e.ctx, drawnAt, 2)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		released.Add(int64(n))
	}
	require.Equal(t, int64(entrants-winners), released.Load(), "each loser released once")
	for _, en := range entries[winners:] {
		h, err := e.store.HoldOf(e.ctx, e.v.ID, en.UserID)
		require.NoError(t, err)
		require.Equal(t, orders.HoldReleased, h.State, "a loser's hold goes")
	}

	// The sweep captured the buyer's hold, nobody asking.
	o, err := e.store.Order(e.ctx, rv.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, o.Status)
	require.NotNil(t, o.Payment)
	require.Equal(t, payment.StatusSucceeded, o.Payment.Status)

	// Past the passes: the no-show winners go.
	late := drawnAt.Add(seckill.DefaultDrawPassSeconds*time.Second + time.Second)
	n, err = holds.Settle(e.ctx, late, 100)
	require.NoError(t, err)
	require.Equal(t, winners-1, n)
	n, err = holds.Settle(e.ctx, late, 100)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.Equal(t, map[orders.HoldState]int{orders.HoldCaptured: 1, orders.HoldReleased: entrants - 1}, e.holdStates(t))
}

// The sweeper settles holds: once the sale ended, every hold not captured
// goes, drawn or not.
func TestSweeperReleasesHoldsOfEndedSale(t *testing.T) {
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	for u := range 3 {
		_, err := holds.Enter(e.ctx, e.v, int64(u+1))
		require.NoError(t, err)
	}
	sw := orders.NewSweeper(orders.SweeperConfig{Lifecycle: e.life, Holds: holds, Log: testLog(t)})
	sw.Sweep(e.ctx)
	require.Equal(t, map[orders.HoldState]int{orders.HoldHeld: 3}, e.holdStates(t), "the sale is on, not drawn: held")
	_, err := e.pool.Exec(e.ctx, `UPDATE vouchers SET end_at = now() - interval '1 second' WHERE id = $1`, e.v.ID)
	require.NoError(t, err)
	sw.Sweep(e.ctx)
	require.Equal(t, map[orders.HoldState]int{orders.HoldReleased: 3}, e.holdStates(t))
}

// A capture whose asker died is taken over by a sweep once stale; one whose
// order stopped waiting for money meanwhile (cancelled) is released instead,
// once the sale is over.
func TestDrawHoldsStaleCaptureSettled(t *testing.T) {
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	rs := e.buy(t, 2, 1)
	var os [2]orders.Order
	for i, r := range rs {
		o, err := e.store.Order(e.ctx, r.OrderID)
		require.NoError(t, err)
		_, err = holds.Enter(e.ctx, e.v, o.UserID)
		require.NoError(t, err)
		_, ok, err := e.store.ClaimCapture(e.ctx, o) // and its asker dies
		require.NoError(t, err)
		require.True(t, ok)
		os[i] = o
	}
	_, err := e.pool.Exec(e.ctx, `UPDATE orders SET status = 'cancelled' WHERE id = $1`, os[1].ID)
	require.NoError(t, err)
	n, err := holds.Settle(e.ctx, time.Now(), 100)
	require.NoError(t, err)
	require.Equal(t, 0, n, "fresh claims are their askers'")
	require.Equal(t, map[orders.HoldState]int{orders.HoldCapturing: 2}, e.holdStates(t))

	_, err = e.pool.Exec(e.ctx, `UPDATE draw_holds SET claimed_at = now() - interval '2 minutes' WHERE voucher_id = $1`, e.v.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(e.ctx, `UPDATE vouchers SET end_at = now() - interval '1 second' WHERE id = $1`, e.v.ID)
	require.NoError(t, err)
	n, err = holds.Settle(e.ctx, time.Now(), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the cancelled order's hold is released")
	paid, err := e.store.Order(e.ctx, os[0].ID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, paid.Status, "the stale capture is made")
	require.Equal(t, map[orders.HoldState]int{orders.HoldCaptured: 1, orders.HoldReleased: 1}, e.holdStates(t))
}

// The page's ask for a winner's payment captures the hold: only the
// buyer's, once.
func TestDrawHoldsCaptureOrder(t *testing.T) {
	e := newPayEnv(t, 10, time.Hour, stack.StripeMock(t))
	holds := newHolds(t, e)
	rs := e.buy(t, 1, 1)
	_, err := holds.Enter(e.ctx, e.v, rs[0].UserID)
	require.NoError(t, err)
	_, ok, err := holds.CaptureOrder(e.ctx, rs[0].UserID+1, rs[0].OrderID)
	require.NoError(t, err)
	require.False(t, ok, "someone else's order")
	_, ok, err = holds.CaptureOrder(e.ctx, rs[0].UserID, 1)
	require.NoError(t, err)
	require.False(t, ok, "no such order (a reservation not yet in PostgreSQL)")
	p, ok, err := holds.CaptureOrder(e.ctx, rs[0].UserID, rs[0].OrderID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, payment.StatusSucceeded, p.Status)
	require.Equal(t, e.v.PriceCents, p.AmountCents)
	_, ok, err = holds.CaptureOrder(e.ctx, rs[0].UserID, rs[0].OrderID)
	require.NoError(t, err)
	require.False(t, ok, "captured once")
}
