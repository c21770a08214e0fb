package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// steerCrowd is a crowd of shoppers buying one unit each of a voucher
// through the gateways in turn, each trying again (same key) after a
// refusal until it has bought or stop is closed: a crowd still pressing
// while the operator changes the sale.
type steerCrowd struct {
	accepted, refused, other atomic.Int64
	wg                       sync.WaitGroup

	mu     sync.Mutex
	others map[string]int // "<status> <code>" -> answers, of the other answers
}

// otherAnswers lists the answers that were neither 202 nor sold_out.
func (c *steerCrowd) otherAnswers() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.others)
}

// crowdBuying starts n shoppers on voucherID; a test closes stop, then
// calls wait.
func crowdBuying(t *testing.T, gws []*testSystem, voucherID string, n int, stop <-chan struct{}) *steerCrowd {
	t.Helper()
	c := &steerCrowd{others: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	for i := range n {
		gw := gws[i%len(gws)]
		tok := gw.shopper(t, testUser())
		key := "crowd-" + strconv.Itoa(i)
		c.wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.base+"/api/v1/vouchers/"+voucherID+"/orders",
					bytes.NewReader([]byte(`{"quantity":1}`)))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Idempotency-Key", key)
				resp, err := gw.client.Do(req)
				if err != nil {
					continue
				}
				var body struct {
					Error struct{ Code string } `json:"error"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusAccepted:
					c.accepted.Add(1)
					return
				case resp.StatusCode == http.StatusConflict && body.Error.Code == "sold_out":
					c.refused.Add(1)
					_ = pause.For(ctx, 30*time.Millisecond) // 50 ms in all: a page, not a tight loop
				default:
					c.other.Add(1)
					c.mu.Lock()
					c.others[strconv.Itoa(resp.StatusCode)+" "+body.Error.Code]++
					c.mu.Unlock()
					if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
						// Shed load (the breaker open on a loaded
						// machine): back off as a client told
						// Retry-After would.
						_ = pause.For(ctx, 200*time.Millisecond)
					}
				}
				_ = pause.For(ctx, 20*time.Millisecond)
			}
		})
	}
	return c
}

// waitBreakersClosed waits until no gateway's breaker is open: a crowd on
// a loaded machine may have opened one (Redis calls past their timeout),
// and what follows tests steering, not load shedding. Half-open counts as
// closing: it lets the next buys through and closes on their success
// (without traffic it stays half-open).
func waitBreakersClosed(t *testing.T, gws []*testSystem) {
	t.Helper()
	for _, gw := range gws {
		var last answer
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			last = gw.do(t, http.MethodGet, "/api/v1/admin/breaker", gw.cfg.AdminToken, nil, nil)
			if st := last.body["state"]; last.status == http.StatusOK && (st == "closed" || st == "half-open") {
				break
			}
			require.True(t, time.Now().Before(deadline), "the breaker stayed open: %s", last.raw)
		}
	}
}

// buyShedAware buys once with pass and key, sending it again (same key
// and pass, as a client told Retry-After would) while the answer is 503
// unavailable: load shed on a loaded machine, which gives the pass back.
func (ts *testSystem) buyShedAware(t *testing.T, voucherID, token, pass, key string) answer {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := ts.buyWithPass(t, voucherID, token, pass, key)
		if r.status != http.StatusServiceUnavailable || !time.Now().Before(deadline) {
			return r
		}
		t.Logf("buy shed (503), sent again: %s", r.raw)
	}
}

// patchVoucher sends the operator's change.
func (ts *testSystem) patchVoucher(t *testing.T, voucherID string, change map[string]any) answer {
	t.Helper()
	return ts.do(t, http.MethodPatch, "/api/v1/admin/vouchers/"+voucherID, ts.cfg.AdminToken, change, nil)
}

// TestSteerRunningSale: the operator steers sales while crowds buy, through
// two gateways. Stock added to a voucher of three buckets mid-crowd sells
// exactly once, the total and the buckets balanced; stock added to a
// sold-out waiting room goes to the next in line and to nobody else; the
// room's new rate reaches both gateways; a later end moves the sale's end
// and its Redis state's expiry, and the crowd buys past the old end. Bad
// values are 400 naming the field, an ended sale 409. On both Redis shapes.
func TestSteerRunningSale(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testSteerRunningSale)
}

func testSteerRunningSale(t *testing.T, env map[string]string) {
	a := startSystem(t, env)
	b := a.startPeer(t, gatewayOnly)
	gws := []*testSystem{a, b.testSystem}
	ctx := context.Background()

	t.Run("add stock mid-crowd, three buckets", func(t *testing.T) {
		c := a.do(t, http.MethodPost, "/api/v1/admin/vouchers", a.cfg.AdminToken, map[string]any{
			"title": "steer", "kind": "seckill", "price_cents": 100, "stock": 40, "per_user_limit": 1,
			"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
			"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "shards": 3,
		}, nil)
		require.Equal(t, http.StatusCreated, c.status, "%s", c.raw)
		vid := c.body["id"].(string)
		stop := make(chan struct{})
		crowd := crowdBuying(t, gws, vid, 120, stop)
		require.Eventually(t, func() bool { return crowd.accepted.Load() >= 10 }, 30*time.Second, 10*time.Millisecond)
		p := a.patchVoucher(t, vid, map[string]any{"add_stock": 25})
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
		require.EqualValues(t, 65, p.body["stock_total"])
		t.Logf("added 25 units with %d of 40 sold", crowd.accepted.Load())
		for deadline := time.Now().Add(30 * time.Second); crowd.accepted.Load() < 65; time.Sleep(10 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "the crowd bought %d of the 65 units; refused sold_out %d, others %v",
				crowd.accepted.Load(), crowd.refused.Load(), crowd.otherAnswers())
		}
		t.Logf("crowd: %d bought, %d refused sold_out, others %v", crowd.accepted.Load(), crowd.refused.Load(), crowd.otherAnswers())
		time.Sleep(500 * time.Millisecond) // the crowd keeps pressing on a sold-out sale
		close(stop)
		crowd.wg.Wait()
		require.EqualValues(t, 65, crowd.accepted.Load(), "no oversell")
		waitBreakersClosed(t, gws)
		// A loaded machine may open the breaker (Redis calls past their
		// timeout) and shed load for a moment; any other refusal than
		// sold_out or that is a fault.
		for answer := range crowd.otherAnswers() {
			require.Contains(t, []string{"503 unavailable", "429 rate_limited"}, answer,
				"every refusal is sold_out, or load shed; the others: %v", crowd.otherAnswers())
		}
		a.waitPersisted(t, vid, 65)
		require.EqualValues(t, 65, a.checkInvariants(t, vid, 1))
		require.EqualValues(t, 65, b.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil).body["stock_total"])

		// The change is recorded with who made it; any gateway lists it
		// (the operator page reads it there).
		var changes []api.VoucherChangeRecord
		got := b.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/changes", b.cfg.AdminToken, nil, nil)
		require.Equal(t, http.StatusOK, got.status, "%s", got.raw)
		require.NoError(t, json.Unmarshal(got.raw, &changes))
		require.Len(t, changes, 1, "%s", got.raw)
		require.EqualValues(t, 25, changes[0].AddStock)
		require.EqualValues(t, 65, changes[0].StockTotal)
		require.Equal(t, "root", changes[0].By, "SECKILL_ADMIN_TOKEN is recorded as root")
	})

	t.Run("add stock to a sold-out room, then its rate", func(t *testing.T) {
		vid := a.createRoomVoucher(t, 3, 1, 1000, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
		const inLine = 10
		line := make([]roomShopperAt, inLine)
		for i := range line {
			u := testUser()
			line[i] = roomShopperAt{user: u, token: a.shopper(t, u), gw: gws[i%2]}
			j := line[i].gw.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/queue", line[i].token, nil, nil)
			require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
		}
		buyAt := func(i int) {
			t.Helper()
			s := line[i]
			q := s.waitPlace(t, vid, func(q answer) bool { return q.body["pass"] != nil }, "admitted (place "+strconv.Itoa(i+1)+")")
			r := s.gw.buyShedAware(t, vid, s.token, q.body["pass"].(string), "steer-"+strconv.Itoa(i))
			require.Equal(t, http.StatusAccepted, r.status, "place %d: %s", i+1, r.raw)
		}
		for i := range 3 {
			buyAt(i)
		}
		for i := 3; i < inLine; i++ {
			q := line[i].waitPlace(t, vid, inState(waitroom.StateSoldOut), "told sold_out (place "+strconv.Itoa(i+1)+")")
			require.EqualValues(t, i-3+1, q.body["position"], "%s", q.raw)
		}
		// A crowd without passes presses all along: it gets none of the
		// units added.
		stop := make(chan struct{})
		bots := crowdBuying(t, gws, vid, 20, stop)
		p := b.patchVoucher(t, vid, map[string]any{"add_stock": 4})
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
		for i := 3; i < 7; i++ {
			buyAt(i)
		}
		for i := 7; i < inLine; i++ {
			line[i].waitPlace(t, vid, func(q answer) bool {
				return q.body["state"] == string(waitroom.StateSoldOut) && q.body["position"] == float64(i-7+1)
			}, "told sold_out at position "+strconv.Itoa(i-7+1)+", behind the units added (place "+strconv.Itoa(i+1)+")")
		}
		close(stop)
		bots.wg.Wait()
		require.Zero(t, bots.accepted.Load(), "nobody outside the line bought")
		waitBreakersClosed(t, gws)
		a.waitPersisted(t, vid, 7)
		require.EqualValues(t, 7, a.checkInvariants(t, vid, 1))

		start := time.Now()
		p = a.patchVoucher(t, vid, map[string]any{"admit_per_second": 2})
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
		require.EqualValues(t, 2, p.body["waiting_room"].(map[string]any)["admit_per_second"])
		require.Eventually(t, func() bool {
			v := b.do(t, http.MethodGet, "/api/v1/vouchers/"+vid, "", nil, nil)
			wr, _ := v.body["waiting_room"].(map[string]any)
			return wr["admit_per_second"] == float64(2)
		}, 10*time.Second, 10*time.Millisecond, "the other gateway follows")
		t.Logf("the other gateway showed the new rate %v after the change", time.Since(start))
	})

	t.Run("a later end, mid-crowd", func(t *testing.T) {
		t.Parallel() // it waits for an end; the others are done by then
		// Far enough that the change lands before it on a loaded machine.
		oldEnd := time.Now().Add(10 * time.Second).Truncate(time.Second)
		c := a.do(t, http.MethodPost, "/api/v1/admin/vouchers", a.cfg.AdminToken, map[string]any{
			"title": "extend", "kind": "seckill", "price_cents": 100, "stock": 30, "per_user_limit": 1,
			"begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
			"end_at":   oldEnd.UTC().Format(time.RFC3339), "shards": 2,
		}, nil)
		require.Equal(t, http.StatusCreated, c.status, "%s", c.raw)
		vid := c.body["id"].(string)
		id, err := strconv.ParseInt(vid, 10, 64)
		require.NoError(t, err)
		waitBreakersClosed(t, gws)
		firstUser := testUser()
		first := a.buy(t, vid, a.shopper(t, firstUser), 1, "")
		require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)

		stop := make(chan struct{})
		crowd := crowdBuying(t, gws, vid, 10, stop)
		newEnd := time.Now().Add(time.Hour).Truncate(time.Second)
		p := a.patchVoucher(t, vid, map[string]any{"end_at": newEnd.UTC().Format(time.RFC3339)})
		require.Equal(t, http.StatusOK, p.status, "%s", p.raw)
		require.Equal(t, newEnd.UTC().Format(time.RFC3339), p.body["end_at"])
		require.Eventually(t, func() bool { return crowd.accepted.Load() == 10 }, 30*time.Second, 10*time.Millisecond)
		close(stop)
		crowd.wg.Wait()
		waitBreakersClosed(t, gws)

		// The sale's Redis state expires with the new end: the bucket count
		// and every bucket's meta and ledger (the buyers' holds).
		want := newEnd.Add(seckill.DefaultStateGrace)
		keys := []string{redisstock.VoucherKeys(id).Shards}
		for bucket := range 2 {
			keys = append(keys, redisstock.BucketKeys(id, bucket).Meta, redisstock.BucketKeys(id, bucket).Ledger)
		}
		for _, key := range keys {
			at, err := a.rdb.PExpireTime(ctx, key).Result()
			require.NoError(t, err)
			require.InDelta(t, want.UnixMilli(), at.Milliseconds(), 1000, "%s expires with the new end", key)
		}

		// Past the old end, the sale goes on.
		time.Sleep(time.Until(oldEnd.Add(500 * time.Millisecond)))
		late := b.buy(t, vid, b.shopper(t, testUser()), 1, "")
		require.Equal(t, http.StatusAccepted, late.status, "a buy after the old end: %s", late.raw)
		a.waitPersisted(t, vid, 12)
		require.EqualValues(t, 12, a.checkInvariants(t, vid, 1))

		early := a.patchVoucher(t, vid, map[string]any{"end_at": oldEnd.Add(time.Minute).UTC().Format(time.RFC3339)})
		require.Equal(t, http.StatusBadRequest, early.status, "%s", early.raw)
		require.Contains(t, string(early.raw), "end_at")
	})

	t.Run("bad values and an ended sale", func(t *testing.T) {
		t.Parallel() // it waits for an end; the others are done by then
		end := time.Now().Add(6 * time.Second).Truncate(time.Second)
		vid := a.createVoucher(t, 5, 1, time.Now().Add(-time.Second), end)
		for body, field := range map[string]string{
			`{"add_stock": 0}`:        "add_stock",
			`{"add_stock": 1.5}`:      "add_stock",
			`{"admit_per_second": 3}`: "admit_per_second", // no waiting room
			`{"end_at": "soon"}`:      "end_at",
		} {
			var in map[string]any
			require.NoError(t, json.Unmarshal([]byte(body), &in))
			r := a.patchVoucher(t, vid, in)
			require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.raw)
			require.Equal(t, "invalid_input", r.errorCode())
			require.Contains(t, string(r.raw), field, "the message names the field")
		}
		time.Sleep(time.Until(end.Add(500 * time.Millisecond)))
		r := a.patchVoucher(t, vid, map[string]any{"add_stock": 1})
		require.Equal(t, http.StatusConflict, r.status, "%s", r.raw)
		require.Equal(t, "conflict", r.errorCode())
		require.EqualValues(t, 5, a.stockLeft(t, vid), "nothing changed")
	})
}
