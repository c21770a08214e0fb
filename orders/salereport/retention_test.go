package salereport_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill/api"
)

// row is one row of sale_counts.
type row struct {
	second time.Time
	name   string
	n      int64
	width  int64
}

func saleRows(t *testing.T, pool *pgxpool.Pool, voucherID int64) []row {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT second, name, n, width FROM sale_counts WHERE voucher_id = $1 ORDER BY second, name`, voucherID)
	require.NoError(t, err)
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.second, &r.name, &r.n, &r.width))
		r.second = r.second.UTC()
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// totals are the figures of a report that a roll-up must keep whole: all
// but the timeline and what is read at its counts' resolution.
func totals(rep api.SaleReport) api.SaleReport {
	rep.Timeline, rep.BucketSeconds, rep.TimeInLine, rep.FirstBuyAt = nil, 0, api.Percentiles{}, nil
	return rep
}

// Once a sale ended longer ago than the retention, its per-second counts
// older than that, a stray attempt after the end included, are rolled up
// into one count per figure and hour: the report's totals are the same,
// the line's length keeps its longest, the timeline draws hours, and the
// rows are a few per hour. Counts still within the retention (a recent
// stray, a sale ended yesterday, one on sale now) are left as they are;
// a second pass has nothing to do, and a count that comes in later for a
// rolled-up hour joins it at the next pass.
func TestRetentionRollsCountsUpToTheHour(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	store := pgstore.New(pool)
	const keep = 30 * 24 * time.Hour
	now := time.Now().UTC()
	voucherEnded := func(ago time.Duration) int64 {
		v := pgstoretest.NewVoucher(t, store, 10, 1)
		_, err := pool.Exec(ctx, `UPDATE vouchers SET begin_at = $2, end_at = $3 WHERE id = $1`,
			v.ID, now.Add(-ago-time.Hour), now.Add(-ago))
		require.NoError(t, err)
		return v.ID
	}
	old, recent := voucherEnded(40*24*time.Hour), voucherEnded(24*time.Hour)
	live := pgstoretest.NewVoucher(t, store, 10, 1).ID

	// Each sale: ten seconds across the turn of an hour, with a line.
	sale := func(v int64, start time.Time) {
		var list []salereport.Count
		for s := range 10 {
			at := start.Add(time.Duration(s) * time.Second)
			list = append(list,
				salereport.Count{VoucherID: v, Second: at, Name: "attempts", N: 3},
				salereport.Count{VoucherID: v, Second: at, Name: "accepted", N: 1},
				salereport.Count{VoucherID: v, Second: at, Name: "refused:sold_out", N: 2},
				salereport.Count{VoucherID: v, Second: at, Name: "admitted", N: 1})
		}
		require.NoError(t, store.AddSaleCounts(ctx, list, nil))
		var gauges []salereport.Count
		for s := range 10 {
			gauges = append(gauges, salereport.Count{VoucherID: v, Second: start.Add(time.Duration(s) * time.Second), Name: "waiting", N: int64(20 - s)})
		}
		require.NoError(t, store.AddSaleCounts(ctx, nil, gauges))
	}
	stray := func(v int64, at time.Time) {
		require.NoError(t, store.AddSaleCounts(ctx, []salereport.Count{
			{VoucherID: v, Second: at, Name: "attempts", N: 1},
			{VoucherID: v, Second: at, Name: "refused:ended", N: 1},
		}, nil))
	}
	oldStart := now.Add(-40*24*time.Hour - 30*time.Minute).Truncate(time.Hour).Add(-3 * time.Second)
	sale(old, oldStart)
	oldStray := now.Add(-35 * 24 * time.Hour).Truncate(time.Second)
	stray(old, oldStray)
	stray(old, now.Add(-time.Hour).Truncate(time.Second))
	sale(recent, now.Add(-25*time.Hour).Truncate(time.Second))
	sale(live, now.Add(-time.Minute).Truncate(time.Second))

	reports := salereport.NewReports(store)
	report := func(v int64) api.SaleReport {
		t.Helper()
		rep, err := reports.Report(ctx, v)
		require.NoError(t, err)
		return rep
	}
	before := map[int64]api.SaleReport{old: report(old), recent: report(recent), live: report(live)}
	kept := map[int64][]row{recent: saleRows(t, pool, recent), live: saleRows(t, pool, live)}
	require.Len(t, saleRows(t, pool, old), 10*5+2+2)

	retention := salereport.NewRetention(salereport.RetentionConfig{Store: store, After: keep})
	rolled, err := retention.Pass(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10*5+2, rolled, "the sale's and the old stray's counts")

	rows := saleRows(t, pool, old)
	// Two hours of the sale's five figures, the old stray's hour, and the
	// recent stray's two counts as they were.
	require.Len(t, rows, 2*5+2+2)
	cutoff := now.Add(-keep)
	for _, r := range rows {
		if r.second.After(cutoff) {
			require.EqualValues(t, 1, r.width, "%+v: within the retention", r)
			continue
		}
		require.EqualValues(t, salereport.RollUpWidth, r.width, "%+v", r)
		require.Zero(t, r.second.Unix()%salereport.RollUpWidth, "%+v: on the hour", r)
	}
	require.Contains(t, rows, row{second: oldStart.Add(3 * time.Second).Truncate(time.Hour), name: "waiting", n: 17, width: salereport.RollUpWidth},
		"the hour's longest line; its first second was on the hour, and widened in place")
	require.Contains(t, rows, row{second: oldStart.Truncate(time.Hour), name: "waiting", n: 20, width: salereport.RollUpWidth})

	after := report(old)
	require.Equal(t, totals(before[old]), totals(after), "the totals are whole")
	require.EqualValues(t, salereport.RollUpWidth, after.BucketSeconds, "the report draws hours")
	var attempts, waiting int64
	for _, b := range after.Timeline {
		attempts += b.Attempts
		waiting = max(waiting, b.Waiting)
	}
	require.Equal(t, after.Attempts, attempts)
	require.EqualValues(t, 20, waiting)
	require.NotNil(t, after.TimeInLine.P50, "read at an hour's resolution")
	require.True(t, after.FirstBuyAt.Equal(oldStart.Truncate(time.Hour)), "the first buy's hour")
	for _, v := range []int64{recent, live} {
		require.Equal(t, kept[v], saleRows(t, pool, v), "voucher %d is within the retention", v)
		require.Equal(t, before[v], report(v))
	}

	rolled, err = retention.Pass(ctx)
	require.NoError(t, err)
	require.Zero(t, rolled, "nothing more is due")

	// Late counts for a rolled-up hour: one at its very start adds to it
	// at once, one later in it joins it at the next pass.
	hour := oldStray.Truncate(time.Hour)
	stray(old, hour)
	stray(old, hour.Add(5*time.Second))
	rolled, err = retention.Pass(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, rolled)
	require.Len(t, saleRows(t, pool, old), 2*5+2+2)
	require.Contains(t, saleRows(t, pool, old), row{second: hour, name: "refused:ended", n: 3, width: salereport.RollUpWidth})
	require.EqualValues(t, after.Attempts+2, report(old).Attempts)
}
