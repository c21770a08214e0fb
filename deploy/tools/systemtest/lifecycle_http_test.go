package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitStatus polls one order through the API until it has the status.
func (ts *testSystem) waitStatus(t *testing.T, token, orderID, status string) answer {
	t.Helper()
	var last answer
	require.Eventually(t, func() bool {
		last = ts.do(t, http.MethodGet, "/api/v1/orders/"+orderID, token, nil, nil)
		return last.status == http.StatusOK && last.body["status"] == status
	}, 30*time.Second, 25*time.Millisecond, "order %s never became %s", orderID, status)
	return last
}

func (ts *testSystem) stockLeft(t *testing.T, voucherID string) float64 {
	t.Helper()
	v := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+voucherID, "", nil, nil)
	require.Equal(t, http.StatusOK, v.status)
	return v.body["stock_left"].(float64)
}

func TestPayAndCancelOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 5, 2, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	alice, bob := ts.shopper(t, 31), ts.shopper(t, 32)

	first := ts.buy(t, vid, alice, 1, "a1")
	require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
	paidID := first.body["order_id"].(string)
	ts.waitStatus(t, alice, paidID, "created")

	require.Equal(t, 404, ts.do(t, http.MethodPost, "/api/v1/orders/"+paidID+"/pay", bob, nil, nil).status, "someone else's order")
	paid := ts.do(t, http.MethodPost, "/api/v1/orders/"+paidID+"/pay", alice, nil, nil)
	require.Equal(t, http.StatusOK, paid.status, "%s", paid.raw)
	require.Equal(t, "paid", paid.body["status"])
	again := ts.do(t, http.MethodPost, "/api/v1/orders/"+paidID+"/pay", alice, nil, nil)
	require.Equal(t, http.StatusOK, again.status, "paying a paid order is a retry: %s", again.raw)
	require.Equal(t, "paid", again.body["status"])
	cancelPaid := ts.do(t, http.MethodPost, "/api/v1/orders/"+paidID+"/cancel", alice, nil, nil)
	require.Equal(t, http.StatusConflict, cancelPaid.status, "a paid order cannot be cancelled")

	second := ts.buy(t, vid, alice, 1, "a2")
	require.Equal(t, http.StatusAccepted, second.status, "%s", second.raw)
	cancelID := second.body["order_id"].(string)
	ts.waitStatus(t, alice, cancelID, "created")
	// The catalog reads the live stock ten times a second.
	require.Eventually(t, func() bool { return ts.stockLeft(t, vid) == 3 }, 5*time.Second, 20*time.Millisecond)
	cancelled := ts.do(t, http.MethodPost, "/api/v1/orders/"+cancelID+"/cancel", alice, nil, nil)
	require.Equal(t, http.StatusOK, cancelled.status, "%s", cancelled.raw)
	require.Equal(t, "cancelled", cancelled.body["status"])
	require.Equal(t, http.StatusOK, ts.do(t, http.MethodPost, "/api/v1/orders/"+cancelID+"/cancel", alice, nil, nil).status, "cancelling a cancelled order is a retry")
	require.Eventually(t, func() bool { return ts.stockLeft(t, vid) == 4 }, 5*time.Second, 20*time.Millisecond,
		"a cancelled order's stock goes back on sale, once")

	// The cancelled unit and alice's per-user allowance are both back: she
	// can buy 1 more (paid 1 + 1 = limit 2), a replay of the cancelled key
	// still names the cancelled order.
	replay := ts.buy(t, vid, alice, 1, "a2")
	require.Equal(t, cancelID, replay.body["order_id"])
	third := ts.buy(t, vid, alice, 1, "a3")
	require.Equal(t, http.StatusAccepted, third.status, "%s", third.raw)
	ts.waitStatus(t, alice, third.body["order_id"].(string), "created")
	require.EqualValues(t, 2, ts.checkInvariants(t, vid, 2))
}

func TestPaymentTimeoutCancelsAndRestocks(t *testing.T) {
	// This test is serial (main_test.go): the cancellation must come within seconds of the deadline.
	ts := startSystem(t, map[string]string{"SECKILL_PAY_TIMEOUT": "2s"})
	vid := ts.createVoucher(t, 2, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	token := ts.shopper(t, 41)
	a := ts.buy(t, vid, token, 1, "")
	require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	id := a.body["order_id"].(string)
	created := ts.waitStatus(t, token, id, "created")
	deadline, err := time.Parse(time.RFC3339Nano, created.body["pay_deadline"].(string))
	require.NoError(t, err)

	ts.waitStatus(t, token, id, "cancelled")
	late := time.Since(deadline)
	t.Logf("cancelled %v after its pay_deadline", late)
	require.Less(t, late, 5*time.Second, "cancellation is seen within a few seconds of the deadline")
	pay := ts.do(t, http.MethodPost, "/api/v1/orders/"+id+"/pay", token, nil, nil)
	require.Equal(t, http.StatusConflict, pay.status, "a timed-out order cannot be paid")
	require.Eventually(t, func() bool { return ts.stockLeft(t, vid) == 2 }, 5*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 0, ts.checkInvariants(t, vid, 1))
	fams := ts.scrape(t)
	require.Equal(t, 1.0, counter(t, fams, "seckill_sweeper_cancelled_total"), "the sweeper counts what it cancelled")
	require.Equal(t, 1.0, counter(t, fams, "seckill_orders_total", "status", "cancelled"))
}

// TestSyncKindsOverHTTP sells limit and common vouchers to a concurrent crowd
// through the same route: each answer is 202 created at once, and exactly the
// stock is sold.
func TestSyncKindsOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	for _, kind := range []string{"limit", "common"} {
		t.Run(kind, func(t *testing.T) {
			a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
				"title": kind + " voucher", "kind": kind, "price_cents": 100, "stock": 30, "per_user_limit": 2,
				"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
				"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			}, nil)
			require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
			vid := a.body["id"].(string)

			const shoppers, tries = 25, 3
			var mu sync.Mutex
			perUser := map[int64]int{}
			var wg sync.WaitGroup
			for u := range shoppers {
				uid := int64(61_000 + u)
				tok := ts.shopper(t, uid)
				for range tries {
					wg.Go(func() {
						b := ts.buy(t, vid, tok, 1, "")
						switch b.status {
						case http.StatusAccepted:
							require.Equal(t, "created", b.body["status"], "a synchronous kind answers created at once")
							mu.Lock()
							perUser[uid]++
							mu.Unlock()
						case http.StatusConflict:
							require.Contains(t, []string{"sold_out", "limit_exceeded"}, b.errorCode())
						default:
							t.Errorf("unexpected %d: %s", b.status, b.raw)
						}
					})
				}
			}
			wg.Wait()
			sold := 0
			for uid, n := range perUser {
				if kind == "limit" {
					require.LessOrEqual(t, n, 2, "user %d over the limit", uid)
				}
				sold += n
			}
			require.Equal(t, 30, sold, "exactly the stock is sold")
			id, _ := strconv.ParseInt(vid, 10, 64)
			var left int64
			require.NoError(t, ts.pool.QueryRow(context.Background(), `SELECT stock_left FROM vouchers WHERE id = $1`, id).Scan(&left))
			require.Zero(t, left)
		})
	}
}
