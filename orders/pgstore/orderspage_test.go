package pgstore_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
)

// Paging through a shopper's orders visits each once, newest first, with or
// without a status, and never another shopper's.
func TestOrdersPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	v := pgstoretest.NewVoucher(t, s, 1000, 1000)
	var rs []seckill.Reservation
	for i := range 23 {
		rs = append(rs, pgstoretest.Reservation(v.ID, 7, 1))
		if i%5 == 0 {
			rs = append(rs, pgstoretest.Reservation(v.ID, 8, 1))
		}
	}
	_, err := s.PersistBatch(ctx, rs, payTimeout)
	require.NoError(t, err)
	var want []int64
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].UserID == 7 {
			want = append(want, rs[i].OrderID)
		}
	}
	// Pay every third of them, to page by status.
	var paid []int64
	for i, id := range want {
		if i%3 == 0 {
			_, err := s.Pay(ctx, 7, id)
			require.NoError(t, err)
			paid = append(paid, id)
		}
	}

	walk := func(status orders.Status, limit int) []int64 {
		var got []int64
		p := orders.Page{Status: status, Limit: limit}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "the walk ends")
			list, err := s.OrdersPage(ctx, 7, p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(list), limit)
			if len(list) == 0 {
				return got
			}
			for _, o := range list {
				require.Equal(t, int64(7), o.UserID)
				if status != "" {
					require.Equal(t, status, o.Status)
				}
				got = append(got, o.ID)
			}
			p.Before = list[len(list)-1].ID
		}
	}
	require.Equal(t, want, walk("", 5))
	require.Equal(t, want, walk("", 100))
	require.Equal(t, paid, walk(orders.StatusPaid, 2))

	_, err = s.OrdersPage(ctx, 7, orders.Page{Limit: 0})
	require.Error(t, err, "a page holds at least one order")
}

// The page queries seek in an index: among 1,000,000 orders, 10,000 of
// them one shopper's (every hundredth), a page in the middle reads about the
// page's rows, not the shopper's 10,000; a page of one status seeks in
// orders_user_status_idx, so it reads no order of another status.
func TestOrdersPageSeeksTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	_ = pgstore.New(pool)
	_, err := pool.Exec(ctx, `
		INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, reserved_at, pay_deadline)
		SELECT 1000000 + g, 1, CASE WHEN g % 100 = 0 THEN 42 ELSE 100 + g % 40000 END, 1, 100,
		       CASE WHEN g % 300 = 0 THEN 'created' ELSE 'paid' END, now(), now() + interval '15 minutes'
		FROM generate_series(1, 1000000) AS g`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE orders`)
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		query  string
		before int64
		status string
		index  string
	}{
		{"first page", pgstore.OrdersPageSQL, math.MaxInt64, "", "orders_user_idx"},
		{"a page in the middle", pgstore.OrdersPageSQL, 1_500_000, "", "orders_user_idx"},
		{"paid, in the middle", pgstore.OrdersPageStatusSQL, 1_500_000, "paid", "orders_user_status_idx"},
	} {
		args := []any{int64(42), tc.before, 51}
		if tc.status != "" {
			args = append(args, tc.status)
		}
		var raw []byte
		err := pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+tc.query, args...).Scan(&raw)
		require.NoError(t, err, tc.name)
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(raw, &plans), tc.name)
		scan, ok := plans[0].Plan.find("Index Scan")
		require.True(t, ok, "%s: the page is an index scan: %s", tc.name, raw)
		if tc.index != "" {
			require.Equal(t, tc.index, scan.Index, "%s: %s", tc.name, raw)
		}
		// Rows the scan read: those it returned and those a filter
		// dropped, never the shopper's 10,000.
		read := scan.ActualRows + scan.RemovedByFilter
		require.LessOrEqual(t, read, float64(51), "%s: %s", tc.name, raw)
		require.Positive(t, scan.ActualRows, tc.name)
		t.Logf("%s: %s on %s read %.0f rows", tc.name, scan.Type, scan.Index, read)
		var text string
		rows, err := pool.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) `+tc.query, args...)
		require.NoError(t, err)
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			text += "\n    " + line
		}
		require.NoError(t, rows.Err())
		t.Logf("%s:%s", tc.name, text)
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Type            string     `json:"Node Type"`
	Index           string     `json:"Index Name"`
	ActualRows      float64    `json:"Actual Rows"`
	RemovedByFilter float64    `json:"Rows Removed by Filter"`
	Plans           []planNode `json:"Plans"`
}

// find returns the first node of the tree of type typ.
func (n planNode) find(typ string) (planNode, bool) {
	if n.Type == typ {
		return n, true
	}
	for _, c := range n.Plans {
		if f, ok := c.find(typ); ok {
			return f, true
		}
	}
	return planNode{}, false
}
