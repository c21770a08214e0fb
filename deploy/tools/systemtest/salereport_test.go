package systemtest

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
	"github.com/flashsale/seckill/seckill/api"
)

// TestSaleReportAfterASale runs a load-tool sale that sells out, then pays
// and cancels a few orders and sells the returned units again, all through
// the real system: the sale report's totals are the load tool's own counts
// plus the test's, and PostgreSQL's orders; the export lists exactly
// PostgreSQL's orders.
func TestSaleReportAfterASale(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := ts.saleConfig()
	cfg.Concurrency = 8
	cfg.FirstUserID = 34_000_000
	cfg.Shoppers, cfg.Attempts = 60, 2
	cfg.Stock, cfg.PerUserLimit = 40, 1
	cfg.Seed = 9
	sale := sellWith(t, ctx, cfg)
	vid := sale.VoucherID
	require.EqualValues(t, cfg.Stock, sale.Sold, "the sale sold out")

	// The test's own part: pay three orders, cancel two, and sell the two
	// returned units again to new shoppers.
	rows, err := ts.pool.Query(ctx, `SELECT id, user_id FROM orders WHERE voucher_id = $1 AND status = 'created' ORDER BY id LIMIT 5`, mustID(t, vid))
	require.NoError(t, err)
	type owned struct{ id, user int64 }
	var some []owned
	for rows.Next() {
		var o owned
		require.NoError(t, rows.Scan(&o.id, &o.user))
		some = append(some, o)
	}
	require.NoError(t, rows.Err())
	require.Len(t, some, 5)
	for i, o := range some {
		action := "/pay"
		if i >= 3 {
			action = "/cancel"
		}
		a := ts.do(t, http.MethodPost, "/api/v1/orders/"+strconv.FormatInt(o.id, 10)+action, ts.shopper(t, o.user), nil, nil)
		require.Equal(t, http.StatusOK, a.status, "%s: %s", action, a.raw)
	}
	ts.waitCatalogStock(t, vid, 2)
	for u := range int64(2) {
		a := ts.buy(t, vid, ts.shopper(t, 35_000_000+u), 1, "")
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	}
	ts.waitPersisted(t, vid, int(cfg.Stock)+2)

	var pg struct{ bought, paid, cancelled, units int64 }
	require.NoError(t, ts.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE status <> 'failed'), count(*) FILTER (WHERE status = 'paid'),
		       coalesce(sum(quantity) FILTER (WHERE status = 'cancelled'), 0), coalesce(sum(quantity), 0)
		FROM orders WHERE voucher_id = $1`, mustID(t, vid)).Scan(&pg.bought, &pg.paid, &pg.cancelled, &pg.units))
	require.EqualValues(t, 3, pg.paid)
	require.EqualValues(t, 2, pg.cancelled)

	// The gateways write their counts once a second: the report catches up.
	attempts := int64(sale.Sent) + 2
	var rep api.SaleReport
	require.Eventually(t, func() bool {
		rep = ts.saleReport(t, vid)
		return rep.Attempts == attempts && rep.Returned == pg.cancelled && sumPaid(rep) == pg.paid
	}, 20*time.Second, 200*time.Millisecond, "the report counts every attempt, payment and return")

	require.Equal(t, vid, rep.VoucherID)
	// The load tool's 202s are its orders and the replays of its keys;
	// the report's accepted are the orders alone.
	require.EqualValues(t, sale.AcceptedOrders+2, rep.Accepted, "the load tool's orders and the test's two")
	require.EqualValues(t, sale.Outcomes[loadtest.OutcomeAccepted]-sale.AcceptedOrders, rep.Replayed, "the 202s that replayed a key's order")
	require.Equal(t, pg.bought, rep.Accepted, "accepted is PostgreSQL's orders")
	var refused int64
	for outcome, n := range sale.Outcomes {
		if outcome == loadtest.OutcomeAccepted {
			continue
		}
		require.EqualValues(t, n, rep.Refusals[string(outcome)], "refusals of %s", outcome)
		refused += int64(n)
	}
	var sum int64
	for _, n := range rep.Refusals {
		sum += n
	}
	require.Equal(t, refused, sum, "no refusal the load tool did not see: %v", rep.Refusals)
	require.Equal(t, rep.Attempts, rep.Accepted+rep.Replayed+sum)
	require.Equal(t, pg.bought, rep.Bought, "bought is PostgreSQL's orders")
	require.Equal(t, pg.paid, rep.Paid)
	require.InDelta(t, float64(pg.paid)/float64(pg.bought), rep.Conversion, 1e-9)
	require.EqualValues(t, 2, rep.Resold, "both returned units sold again")
	require.Equal(t, pg.units-int64(cfg.Stock), rep.Resold)
	require.Zero(t, rep.TimedOut)
	require.NotNil(t, rep.FirstBuyAt)
	require.NotNil(t, rep.SoldOutAt)
	require.False(t, rep.SoldOutAt.Before(*rep.FirstBuyAt), "sold out after the first buy")
	t.Logf("load tool: sent %d, outcomes %v; report: attempts %d, accepted %d, refusals %v, bought %d, paid %d, returned %d, resold %d, sold out %s after the first buy, %d seconds",
		sale.Sent, sale.Outcomes, rep.Attempts, rep.Accepted, rep.Refusals, rep.Bought, rep.Paid, rep.Returned, rep.Resold,
		rep.SoldOutAt.Sub(*rep.FirstBuyAt), len(rep.Timeline))
	require.Nil(t, rep.TimeInLine.P50, "no waiting room, no line")
	var tlAttempts int64
	for i, s := range rep.Timeline {
		tlAttempts += s.Attempts
		if i > 0 {
			require.Equal(t, time.Second, s.T.Sub(rep.Timeline[i-1].T), "one element a second")
		}
	}
	require.Equal(t, rep.Attempts, tlAttempts)

	// The export: PostgreSQL's orders, one line each.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.base+"/api/v1/admin/vouchers/"+vid+"/orders.csv", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+ts.cfg.AdminToken)
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	lines, err := csv.NewReader(resp.Body).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"order_id", "user_id", "quantity", "status", "reserved_at", "paid_at"}, lines[0])
	status := map[string]string{}
	prows, err := ts.pool.Query(ctx, `SELECT id::text, status FROM orders WHERE voucher_id = $1`, mustID(t, vid))
	require.NoError(t, err)
	for prows.Next() {
		var id, st string
		require.NoError(t, prows.Scan(&id, &st))
		status[id] = st
	}
	require.NoError(t, prows.Err())
	require.Len(t, lines[1:], len(status))
	paidRows := 0
	for _, l := range lines[1:] {
		require.Equal(t, status[l[0]], l[3], "order %s", l[0])
		if l[3] == "paid" {
			paidRows++
			require.NotEmpty(t, l[5])
		}
	}
	require.EqualValues(t, pg.paid, paidRows)

	// Errors per the contract, on both routes.
	for _, route := range []string{"/report", "/orders.csv"} {
		a := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/x"+route, ts.cfg.AdminToken, nil, nil)
		require.Equal(t, http.StatusBadRequest, a.status, route)
		require.Equal(t, "invalid_input", a.errorCode())
		a = ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/1"+route, ts.cfg.AdminToken, nil, nil)
		require.Equal(t, http.StatusNotFound, a.status, "%s: %s", route, a.raw)
		require.Equal(t, "not_found", a.errorCode())
		a = ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+route, "", nil, nil)
		require.Equal(t, http.StatusUnauthorized, a.status, route)
		a = ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+route, ts.shopper(t, 1), nil, nil)
		require.Equal(t, http.StatusForbidden, a.status, route)
	}
}

// saleReport reads the voucher's sale report as its operator does.
func (ts *testSystem) saleReport(t *testing.T, vid string) api.SaleReport {
	t.Helper()
	a := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/report", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	var rep api.SaleReport
	require.NoError(t, json.Unmarshal(a.raw, &rep))
	return rep
}

func sumPaid(rep api.SaleReport) (n int64) {
	for _, s := range rep.Timeline {
		n += s.Paid
	}
	return n
}

func mustID(t *testing.T, id string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(id, 10, 64)
	require.NoError(t, err)
	return n
}

// TestSaleReportOfAWaitingRoomOnTwoGateways: shoppers wait in a room's line
// and buy with their passes through two gateways: each gateway counts what
// it answered and what its admitter admitted, and the report is the sum:
// every attempt once, the room's own admissions, a line that was there and
// a time in line.
func TestSaleReportOfAWaitingRoomOnTwoGateways(t *testing.T) {
	t.Parallel()
	a := startSystem(t, nil)
	b := a.startPeer(t, gatewayOnly)
	const stock, shoppers = 6, 10
	vid := a.createRoomVoucher(t, stock, 1, 3, 0, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	path := "/api/v1/vouchers/" + vid + "/queue"
	toks := make([]string, shoppers)
	for i := range toks {
		toks[i] = a.shopper(t, testUser())
		j := a.do(t, http.MethodPost, path, toks[i], nil, nil)
		require.Equal(t, http.StatusOK, j.status, "%s", j.raw)
	}
	noPass := b.buy(t, vid, toks[shoppers-1], 1, "")
	require.Equal(t, "not_admitted", noPass.errorCode(), "%s", noPass.raw)

	// Each shopper polls their place, alternately on either gateway, and
	// buys with the pass there once admitted, until the stock is gone.
	gateways := []*testSystem{a, b.testSystem}
	done := make([]bool, shoppers)
	attempts, bought := int64(1), 0
	deadline := time.Now().Add(45 * time.Second)
	for bought < stock {
		require.True(t, time.Now().Before(deadline), "%d of %d bought", bought, stock)
		for i := range toks {
			if done[i] {
				continue
			}
			g := gateways[i%2]
			q := g.do(t, http.MethodGet, path, toks[i], nil, nil)
			require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
			switch q.body["state"] {
			case "admitted":
				buy := g.buyWithPass(t, vid, toks[i], q.body["pass"].(string), "")
				attempts++
				require.Equal(t, http.StatusAccepted, buy.status, "%s", buy.raw)
				done[i] = true
				bought++
			case "closed", "sold_out":
				done[i] = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.waitPersisted(t, vid, stock)

	var rep api.SaleReport
	var admitted float64
	require.Eventually(t, func() bool {
		st := a.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/stats", a.cfg.AdminToken, nil, nil)
		admitted = st.body["queue"].(map[string]any)["admitted"].(float64)
		rep = b.saleReport(t, vid)
		return rep.Attempts == attempts && float64(rep.Admitted) == admitted
	}, 20*time.Second, 200*time.Millisecond, "the report counts every attempt and admission once: %+v", &rep)
	require.EqualValues(t, attempts-1, rep.Accepted)
	require.Equal(t, map[string]int64{"not_admitted": 1}, rep.Refusals)
	require.EqualValues(t, 1, rep.BotsRefused)
	require.EqualValues(t, stock, rep.Bought)
	require.GreaterOrEqual(t, rep.Admitted, int64(stock), "everyone who bought was admitted")
	require.NotNil(t, rep.SoldOutAt)
	var longest int64
	for _, s := range rep.Timeline {
		longest = max(longest, s.Waiting)
	}
	require.Positive(t, longest, "the line was recorded")
	require.LessOrEqual(t, longest, int64(shoppers))
	require.NotNil(t, rep.TimeInLine.P50)
	require.NotNil(t, rep.TimeInLine.P99)
	require.LessOrEqual(t, *rep.TimeInLine.P50, *rep.TimeInLine.P99)
	t.Logf("report: admitted %d, bought %d, longest line %d, time in line p50 %d ms, p99 %d ms, %d seconds",
		rep.Admitted, rep.Bought, longest, *rep.TimeInLine.P50, *rep.TimeInLine.P99, len(rep.Timeline))
}

// TestSaleReportCountsReplaysApart: shoppers retry their buys with the same
// Idempotency-Key, as a page does after a lost answer, and each retry is
// answered 202 with the order the key made. For every kind of voucher the
// report's accepted is the orders made, and the retries are replayed
// attempts beside them.
func TestSaleReportCountsReplaysApart(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	for _, kind := range []string{"seckill", "limit", "common"} {
		t.Run(kind, func(t *testing.T) {
			vid := ts.createKindVoucher(t, kind, 10, 1, false)

			// Three shoppers buy once each; the first retries twice, the
			// second once.
			const shoppers, retries = 3, 3
			orders := map[string]bool{}
			for i := range shoppers {
				token, key := ts.shopper(t, testUser()), "key-"+strconv.Itoa(i)
				first := ts.buy(t, vid, token, 1, key)
				require.Equal(t, http.StatusAccepted, first.status, "%s", first.raw)
				orders[first.body["order_id"].(string)] = true
				for range max(2-i, 0) {
					again := ts.buy(t, vid, token, 1, key)
					require.Equal(t, http.StatusAccepted, again.status, "%s", again.raw)
					require.Equal(t, first.body["order_id"], again.body["order_id"], "the retry is the key's order")
				}
			}
			require.Len(t, orders, shoppers)
			if kind == "seckill" {
				ts.waitPersisted(t, vid, shoppers)
			}

			var rep api.SaleReport
			require.Eventually(t, func() bool {
				rep = ts.saleReport(t, vid)
				return rep.Attempts == shoppers+retries
			}, 20*time.Second, 200*time.Millisecond, "the report counts every attempt: %+v", &rep)
			require.EqualValues(t, shoppers, rep.Bought, "PostgreSQL's orders")
			require.Equal(t, rep.Bought, rep.Accepted, "accepted is the orders made, not the 202s")
			require.EqualValues(t, retries, rep.Replayed)
			require.Empty(t, rep.Refusals)
			var accepted, replayed int64
			for _, s := range rep.Timeline {
				accepted += s.Accepted
				replayed += s.Replayed
			}
			require.Equal(t, rep.Accepted, accepted)
			require.Equal(t, rep.Replayed, replayed)
		})
	}
}

// TestSaleReportOfAYear: a sale, then one attempt recorded a year later (a
// refusal before any limit is recorded unthrottled): the gateway answers
// the report in wider buckets, at most 3600 of them, in a body of a few
// hundred kilobytes, not one element for each of the year's 31 million
// seconds.
func TestSaleReportOfAYear(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	vid := ts.createVoucher(t, 5, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	buy := ts.buy(t, vid, ts.shopper(t, testUser()), 1, "")
	require.Equal(t, http.StatusAccepted, buy.status, "%s", buy.raw)
	var rep api.SaleReport
	require.Eventually(t, func() bool {
		rep = ts.saleReport(t, vid)
		return rep.Attempts == 1
	}, 20*time.Second, 200*time.Millisecond)
	require.EqualValues(t, 1, rep.BucketSeconds)
	require.Len(t, rep.Timeline, 1)

	later := rep.Timeline[0].T.AddDate(1, 0, 0)
	_, err := ts.pool.Exec(t.Context(), `INSERT INTO sale_counts (voucher_id, second, name, n)
		VALUES ($1, $2, 'attempts', 1), ($1, $2, 'refused:ended', 1)`, mustID(t, vid), later)
	require.NoError(t, err)
	a := ts.do(t, http.MethodGet, "/api/v1/admin/vouchers/"+vid+"/report", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
	rep = api.SaleReport{}
	require.NoError(t, json.Unmarshal(a.raw, &rep))
	t.Logf("a year: %d buckets of %d s, %d bytes", len(rep.Timeline), rep.BucketSeconds, len(a.raw))
	require.EqualValues(t, 6*3600, rep.BucketSeconds)
	require.LessOrEqual(t, len(rep.Timeline), 3600)
	require.Less(t, len(a.raw), 1<<20)
	require.EqualValues(t, 2, rep.Attempts)
	require.EqualValues(t, 1, rep.Accepted)
	require.Equal(t, map[string]int64{"ended": 1}, rep.Refusals)
	require.EqualValues(t, 1, rep.Timeline[0].Accepted)
	require.EqualValues(t, 1, rep.Timeline[len(rep.Timeline)-1].Refusals["ended"])
}
