package systemtest

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/seckill/seckill/redisstock/redisstocktest"
	"github.com/stretchr/testify/require"
)

func TestShardedVoucherSale(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testShardedVoucherSale)
}

// testShardedVoucherSale sells a voucher of shards: 8 to a crowd whose users
// crowd two of its buckets (so most buys need stock moved in), each buy sent
// twice with its Idempotency-Key, 503s retried as shoppers do. Everything
// sells (PostgreSQL's created orders are the stock exactly) with one order
// per key and nobody over the limit; a cancellation
// puts the stock back in its bucket and it sells again; PostgreSQL and
// Redis agree at the end.
func testShardedVoucherSale(t *testing.T, env map[string]string) {
	ts := startSystem(t, env)
	const stock, limit, buyers = 120, 2, 150
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "hot voucher", "kind": "seckill", "price_cents": 250, "stock": stock, "shards": 8,
		"per_user_limit": limit, "begin_at": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"end_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	require.EqualValues(t, 8, a.body["shards"])
	vid := a.body["id"].(string)

	var attempts []crowdBuy
	for i := range buyers {
		u := int64(900_000 + 8*i) // home bucket 0
		if i%3 == 1 {
			u++ // bucket 1
		} else if i%5 == 4 {
			u += int64(i % 8)
		}
		tok := ts.shopper(t, u)
		for j := range limit + 1 {
			at := crowdBuy{user: u, token: tok, key: fmt.Sprintf("k-%d-%d", u, j), qty: 1}
			attempts = append(attempts, at, at)
		}
	}
	answers := make([]answer, len(attempts))
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() { answers[i] = ts.buyRetrying(t, vid, attempts[i].token, attempts[i].qty, attempts[i].key) })
	}
	wg.Wait()

	_, orders := ordersByKey(t, attempts, answers)
	// Every 202 is an order in PostgreSQL. One may end failed: a buy whose
	// queue write was not acknowledged in time keeps its hold and answers
	// 503, the retry replays it with 202, and if the message never landed
	// the reconciler fails it and its stock sells again.
	ts.waitPersisted(t, vid, len(orders))
	failed := 0
	var cancelID string
	for id := range orders {
		var status string
		require.NoError(t, ts.pool.QueryRow(t.Context(), `SELECT status FROM orders WHERE id = $1`, id).Scan(&status), "order %s", id)
		switch status {
		case "failed":
			failed++
		case "created":
			cancelID = id
		default:
			t.Fatalf("order %s is %s", id, status)
		}
	}
	require.Equal(t, stock, len(orders)-failed, "the accepted orders that stand are the stock")
	if failed > 0 {
		// Each failed one is an orphan the reconciler released, never an
		// order the workers refused because Redis sold more than
		// PostgreSQL had or let a user past the limit.
		m := regexp.MustCompile(`seckill_reconciler_released_total (\d+)`).FindSubmatch(ts.metricsText(t))
		require.NotNil(t, m)
		require.Equal(t, strconv.Itoa(failed), string(m[1]))
	}
	t.Logf("%d orders accepted for %d units, %d of them failed later (queue write not acknowledged in time)", len(orders), stock, failed)
	require.EqualValues(t, stock, ts.checkInvariants(t, vid, limit))

	// A cancellation gives the unit back to its buyer's bucket; a shopper
	// homed in another bucket buys it.
	owner := orders[cancelID]
	c := ts.do(t, http.MethodPost, "/api/v1/orders/"+cancelID+"/cancel", owner.token, nil, nil)
	require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
	other := 899_992 + (owner.user+3)%8 // a new shopper, homed three buckets further
	var bought answer
	require.Eventually(t, func() bool {
		bought = ts.buy(t, vid, ts.shopper(t, other), 1, "after-cancel")
		return bought.status == http.StatusAccepted
	}, 30*time.Second, 100*time.Millisecond, "the cancelled unit sells again: %s", bought.raw)
	ts.waitPersisted(t, vid, len(orders)+1)
	require.EqualValues(t, stock, ts.checkInvariants(t, vid, limit))

	id, err := strconv.ParseInt(vid, 10, 64)
	require.NoError(t, err)
	for b := range 8 {
		require.True(t, redisstocktest.BucketOnSale(t, ts.rdb, id, b), "bucket %d is on sale", b)
	}
	stats := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, stats.status, "%s", stats.raw)
	require.EqualValues(t, 0, stats.body["stock_left"])
	drift := stats.body["drift"].(map[string]any)
	require.Equal(t, true, drift["ok"], "Redis and PostgreSQL agree once nothing is in flight: %v", drift["problems"])
	v := ts.waitCatalogStock(t, vid, 0) // the cancelled unit sold again
	require.EqualValues(t, 8, v.body["shards"])
}
