package salereport_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/orders/salereport"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/testlog"
)

func newStore(t *testing.T) *pgstore.Store {
	t.Helper()
	return pgstore.New(stack.NewDatabase(t))
}

// Two gateways count the same seconds of one sale: the report is their sum,
// the line's length the longest either saw, and the events' payments,
// timeouts and returns land beside the attempts.
func TestTwoRecordersAddUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore(t)
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	a := salereport.NewRecorder(salereport.RecorderConfig{Store: store})
	b := salereport.NewRecorder(salereport.RecorderConfig{Store: store})

	for range 5 {
		a.Attempt(v.ID, "", "")
	}
	for range 3 {
		b.Attempt(v.ID, "", "")
	}
	a.Attempt(v.ID, "sold_out", "")
	b.Attempt(v.ID, "rate_limited", "user_limit")
	b.Attempt(v.ID, "rate_limited", "address_limit")
	a.Attempt(v.ID, "captcha_invalid", "")
	a.Step(v.ID, 4, 30)
	b.Step(v.ID, 2, 50)
	b.Step(v.ID, 0, 0) // an idle room records nothing

	deadline := time.Now()
	o := orders.Order{VoucherID: v.ID, Quantity: 2, PayDeadline: deadline}
	paid, cancelled, timedOut, failed := o, o, o, o
	paid.Status, cancelled.Status, timedOut.Status, failed.Status = orders.StatusPaid, orders.StatusCancelled, orders.StatusCancelled, orders.StatusFailed
	cancelled.UpdatedAt = deadline.Add(-time.Second)
	timedOut.UpdatedAt = deadline
	gw := a.Events(nil)
	sweeper := b.Events(nil)
	require.NoError(t, gw.Publish(ctx, orders.Event{Order: paid}))
	require.NoError(t, gw.Publish(ctx, orders.Event{Order: cancelled}))
	require.NoError(t, sweeper.Publish(ctx, orders.Event{Order: timedOut}))
	require.NoError(t, gw.Publish(ctx, orders.Event{Order: failed}))
	b.Returned(v.ID, 3) // a reservation the workers recorded failed

	require.True(t, a.Flush(ctx))
	require.True(t, b.Flush(ctx))
	require.True(t, a.Flush(ctx), "an empty flush is no failure")

	rep, err := salereport.NewReports(store).Report(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(v.ID, 10), rep.VoucherID)
	require.EqualValues(t, 12, rep.Attempts)
	require.EqualValues(t, 8, rep.Accepted)
	require.Equal(t, map[string]int64{"sold_out": 1, "rate_limited": 2, "captcha_invalid": 1}, rep.Refusals)
	require.Equal(t, map[string]int64{"user_limit": 1, "address_limit": 1}, rep.Limiters)
	require.EqualValues(t, 3, rep.BotsRefused)
	require.EqualValues(t, 6, rep.Admitted)
	require.EqualValues(t, 1, rep.TimedOut)
	require.EqualValues(t, 9, rep.Returned, "two cancels and a failure of two units each, three units from the workers")
	require.NotNil(t, rep.FirstBuyAt)

	var waiting, paidSum, attempts int64
	for _, s := range rep.Timeline {
		waiting = max(waiting, s.Waiting)
		paidSum += s.Paid
		attempts += s.Attempts
	}
	require.EqualValues(t, 50, waiting, "the line's length is the longest seen, not a sum")
	require.EqualValues(t, 1, paidSum)
	require.EqualValues(t, rep.Attempts, attempts)
}

// A flush PostgreSQL refuses loses nothing: the next one writes it all.
func TestFailedFlushKeepsCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	store := pgstore.New(pool)
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	r := salereport.NewRecorder(salereport.RecorderConfig{Store: store})
	r.Attempt(v.ID, "", "")
	_, err := pool.Exec(ctx, "ALTER TABLE sale_counts RENAME TO sale_counts_away")
	require.NoError(t, err)
	require.False(t, r.Flush(ctx))
	r.Attempt(v.ID, "sold_out", "")
	_, err = pool.Exec(ctx, "ALTER TABLE sale_counts_away RENAME TO sale_counts")
	require.NoError(t, err)
	require.True(t, r.Flush(ctx))
	rep, err := salereport.NewReports(store).Report(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, rep.Attempts)
	require.EqualValues(t, 1, rep.Accepted)
}

// A flood of refusals before any limit (recorded unthrottled), spread over
// days of seconds while PostgreSQL takes nothing: the recorder keeps one
// figure per voucher, second and answer, never one per attempt, and at
// most 200,000 of them (deploy/OPERATING.md), so what it holds between
// flushes is bounded; once PostgreSQL takes them again, one flush writes
// what it kept. Not parallel: it measures the heap.
func TestRecorderStaysBoundedUnderAFlood(t *testing.T) {
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	store := pgstore.New(pool)
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	logs := &testlog.Buffer{}
	r := salereport.NewRecorder(salereport.RecorderConfig{Store: store, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	salereport.SetClock(r, func() time.Time { return now })
	_, err := pool.Exec(ctx, "ALTER TABLE sale_counts RENAME TO sale_counts_away")
	require.NoError(t, err)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const seconds, perSecond = 300_000, 4
	for s := range seconds {
		now = t0.Add(time.Duration(s) * time.Second)
		for range perSecond {
			r.Attempt(v.ID, "ended", "")
		}
		if s%10_000 == 9_999 {
			require.False(t, r.Flush(ctx))
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	pending := salereport.Pending(r)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d attempts over %d seconds: %d figures kept, the heap %d KB larger", seconds*perSecond, seconds, pending, grown>>10)
	require.Equal(t, 200_000, pending, "two figures a second (attempts, refused:ended) until the cap")
	require.Less(t, grown, int64(32<<20))
	var dropped float64
	for _, l := range logs.JSONLines(t) {
		if n, ok := l["dropped"].(float64); ok {
			dropped += n
		}
	}
	require.Positive(t, dropped, "what did not fit was dropped, and said so")

	_, err = pool.Exec(ctx, "ALTER TABLE sale_counts_away RENAME TO sale_counts")
	require.NoError(t, err)
	require.True(t, r.Flush(ctx))
	require.Zero(t, salereport.Pending(r))
	rep, err := salereport.NewReports(store).Report(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, pending/2*perSecond, rep.Attempts, "the seconds kept, whole")
	require.Equal(t, map[string]int64{"ended": rep.Attempts}, rep.Refusals)
	require.LessOrEqual(t, len(rep.Timeline), salereport.MaxTimeline)
}

// Run flushes on its own, and once more when it stops.
func TestRunFlushesAtTheEnd(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	r := salereport.NewRecorder(salereport.RecorderConfig{Store: store, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	r.Attempt(v.ID, "", "")
	cancel()
	require.NoError(t, <-done)
	rep, err := salereport.NewReports(store).Report(context.Background(), v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Attempts)
}

// The report's order figures are PostgreSQL's, the sell-out the
// reservation that took the last unit, and the export lists every order.
func TestOrdersFiguresAndExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore(t)
	v := pgstoretest.NewVoucher(t, store, 3, 2)
	var rs []seckill.Reservation
	for i := range 3 {
		r := pgstoretest.Reservation(v.ID, int64(100+i), 1)
		r.ReservedAt = r.ReservedAt.Add(time.Duration(i) * time.Second)
		rs = append(rs, r)
	}
	_, err := store.PersistBatch(ctx, rs, time.Minute)
	require.NoError(t, err)
	_, err = store.Pay(ctx, 100, rs[0].OrderID)
	require.NoError(t, err)
	_, err = store.Cancel(ctx, 101, rs[1].OrderID)
	require.NoError(t, err)
	again := pgstoretest.Reservation(v.ID, 103, 1)
	again.ReservedAt = again.ReservedAt.Add(5 * time.Second)
	_, err = store.PersistBatch(ctx, []seckill.Reservation{again}, time.Minute)
	require.NoError(t, err)

	reports := salereport.NewReports(store)
	rep, err := reports.Report(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 4, rep.Bought)
	require.EqualValues(t, 1, rep.Paid)
	require.InDelta(t, 0.25, rep.Conversion, 1e-9)
	require.NotNil(t, rep.SoldOutAt)
	require.True(t, rep.SoldOutAt.Equal(rs[2].ReservedAt), "the third unit sold out the stock of three")
	require.Empty(t, rep.Timeline, "nothing was recorded")
	require.Nil(t, rep.FirstBuyAt)

	var buf bytes.Buffer
	require.NoError(t, reports.WriteOrdersCSV(ctx, v.ID, &buf))
	lines, err := csv.NewReader(&buf).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"order_id", "user_id", "quantity", "status", "reserved_at", "paid_at"}, lines[0])
	require.Len(t, lines, 5)
	byID := map[string][]string{}
	for _, l := range lines[1:] {
		byID[l[0]] = l
	}
	first := byID[strconv.FormatInt(rs[0].OrderID, 10)]
	require.Equal(t, []string{"100", "1", "paid"}, first[1:4])
	require.NotEmpty(t, first[5], "a paid order has its paid_at")
	_, err = time.Parse(time.RFC3339Nano, first[4])
	require.NoError(t, err)
	require.Equal(t, "cancelled", byID[strconv.FormatInt(rs[1].OrderID, 10)][3])
	require.Empty(t, byID[strconv.FormatInt(rs[1].OrderID, 10)][5])

	_, err = reports.Report(ctx, v.ID+1_000_000)
	require.ErrorIs(t, err, apperr.ErrNotFound)
}

// The time in line from the line's figures: 10 enter the pre-queue, the
// room admits 4 a second, then 2 more join.
func TestTimeInLine(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	c := func(s int, name string, n int64) salereport.Count {
		return salereport.Count{VoucherID: 1, Second: t0.Add(time.Duration(s) * time.Second), Name: name, N: n}
	}
	list := []salereport.Count{
		c(0, "admitted", 4), c(0, "waiting", 6),
		c(1, "admitted", 4), c(1, "waiting", 2),
		c(2, "admitted", 2), c(2, "waiting", 2), // two joined during second 2
		c(3, "admitted", 2),
		c(5, "attempts", 1),
	}
	rep := salereport.Build(1, list, salereport.OrderFigures{StockTotal: 12, UnitsHeld: 12})
	require.Len(t, rep.Timeline, 6, "the silent second 4 is there too")
	require.EqualValues(t, 12, rep.Admitted)
	// The 6th admitted entered at 0 and got in at 1; the 12th entered at 2
	// and got in at 3.
	require.Equal(t, api.Percentiles{P50: ptr(1000), P99: ptr(1000)}, rep.TimeInLine)
	require.True(t, rep.FirstBuyAt.Equal(t0.Add(5*time.Second)))
	require.Zero(t, rep.Resold)

	none := salereport.Build(1, nil, salereport.OrderFigures{})
	require.Nil(t, none.TimeInLine.P50)
	require.EqualValues(t, 1, none.BucketSeconds)

	// A stray attempt a day later widens the timeline's buckets, not the
	// time in line, which is walked from the line's own seconds.
	later := salereport.Build(1, append(list, c(86_400, "attempts", 1)), salereport.OrderFigures{StockTotal: 12, UnitsHeld: 12})
	require.EqualValues(t, 60, later.BucketSeconds)
	require.Equal(t, rep.TimeInLine, later.TimeInLine)
	require.EqualValues(t, 12, later.Timeline[0].Admitted, "the minute holds the line's four seconds")
	require.EqualValues(t, 6, later.Timeline[0].Waiting, "the longest line of the minute")
}

// The timeline's buckets are the narrowest that keep it within
// MaxTimeline: per second up to 3600 seconds, then 10 s, a minute, ...;
// every count lands in the bucket that holds its second, and the buckets
// start on multiples of their width.
func TestTimelineBuckets(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		span  time.Duration
		width int64
	}{
		{0, 1},
		{3599 * time.Second, 1},
		{3600 * time.Second, 10},
		{10*time.Hour - 10*time.Second, 10},
		{10 * time.Hour, 60},
		{24 * time.Hour, 60},
		{30 * 24 * time.Hour, 3600},
		{365 * 24 * time.Hour, 6 * 3600},
		{20 * 365 * 24 * time.Hour, 7 * 24 * 3600},
		{200 * 365 * 24 * time.Hour, 70 * 24 * 3600},
	} {
		list := []salereport.Count{
			{VoucherID: 1, Second: t0.Add(7 * time.Second), Name: "attempts", N: 2},
			{VoucherID: 1, Second: t0.Add(7 * time.Second), Name: "refused:sold_out", N: 2},
			{VoucherID: 1, Second: t0.Add(7*time.Second + tc.span), Name: "attempts", N: 1},
			{VoucherID: 1, Second: t0.Add(7*time.Second + tc.span), Name: "accepted", N: 1},
		}
		rep := salereport.Build(1, list, salereport.OrderFigures{})
		require.Equal(t, tc.width, rep.BucketSeconds, "span %s", tc.span)
		from, to := t0.Add(7*time.Second).Unix(), t0.Add(7*time.Second+tc.span).Unix()
		require.EqualValues(t, to/tc.width-from/tc.width+1, len(rep.Timeline), "span %s: the buckets from the first to the last", tc.span)
		require.LessOrEqual(t, len(rep.Timeline), salereport.MaxTimeline)
		first, last := rep.Timeline[0], rep.Timeline[len(rep.Timeline)-1]
		require.Zero(t, first.T.Unix()%tc.width, "a bucket starts on a multiple of its width")
		require.Equal(t, time.Duration(tc.width)*time.Second*time.Duration(len(rep.Timeline)-1), last.T.Sub(first.T))
		require.EqualValues(t, 3, rep.Attempts)
		require.EqualValues(t, 1, rep.Accepted)
		require.True(t, rep.FirstBuyAt.Equal(t0.Add(7*time.Second)), "the first attempt's own second")
		var attempts int64
		for _, b := range rep.Timeline {
			attempts += b.Attempts
		}
		require.EqualValues(t, 3, attempts, "span %s", tc.span)
		if tc.span > 0 {
			require.EqualValues(t, 2, first.Refusals["sold_out"])
			require.EqualValues(t, 1, last.Accepted)
		}
	}

	// Counts the retention rolled up to the hour are drawn whole, never in
	// buckets narrower than theirs, beside a later per-second count.
	rolled := salereport.Build(1, []salereport.Count{
		{VoucherID: 1, Second: t0, Name: "attempts", N: 30, Width: salereport.RollUpWidth},
		{VoucherID: 1, Second: t0.Add(time.Hour), Name: "attempts", N: 3, Width: salereport.RollUpWidth},
		{VoucherID: 1, Second: t0.Add(time.Hour + 5*time.Second), Name: "attempts", N: 1, Width: 1},
	}, salereport.OrderFigures{})
	require.EqualValues(t, salereport.RollUpWidth, rolled.BucketSeconds)
	require.Len(t, rolled.Timeline, 2)
	require.EqualValues(t, 30, rolled.Timeline[0].Attempts)
	require.EqualValues(t, 4, rolled.Timeline[1].Attempts)
}

// A stray attempt long after a sale (a refusal before any limit is
// recorded unthrottled) stretches the span of its figures, not its data:
// the report has at most MaxTimeline buckets whether the stray came a day
// or a year after, and what building and encoding it allocates stays a few
// megabytes. Not parallel: it measures the allocations.
func TestReportIsBoundedByTheDataNotTheSpan(t *testing.T) {
	ctx := context.Background()
	store := newStore(t)
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, name string, n int64) salereport.Count {
		return salereport.Count{VoucherID: v.ID, Second: t0.Add(d), Name: name, N: n}
	}
	var sale []salereport.Count
	for s := range 10 {
		d := time.Duration(s) * time.Second
		sale = append(sale, at(d, "attempts", 5), at(d, "accepted", 1), at(d, "refused:sold_out", 4))
	}
	require.NoError(t, store.AddSaleCounts(ctx, sale, nil))
	reports := salereport.NewReports(store)
	// measure is the report, what reading, building and encoding it
	// allocated, and the size of its JSON.
	measure := func() (rep api.SaleReport, alloc uint64, size int) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rep, err := reports.Report(ctx, v.ID)
		require.NoError(t, err)
		body, err := json.Marshal(rep)
		require.NoError(t, err)
		runtime.ReadMemStats(&after)
		return rep, after.TotalAlloc - before.TotalAlloc, len(body)
	}
	rep, alloc, size := measure()
	require.Len(t, rep.Timeline, 10)
	t.Logf("the sale alone: %d points of %d s, %d KB allocated, %d bytes of JSON", len(rep.Timeline), rep.BucketSeconds, alloc>>10, size)

	attempts := int64(50)
	for _, stray := range []struct {
		name  string
		after time.Duration
	}{{"a day", 24 * time.Hour}, {"a year", 365 * 24 * time.Hour}} {
		require.NoError(t, store.AddSaleCounts(ctx, []salereport.Count{at(stray.after, "attempts", 1), at(stray.after, "refused:ended", 1)}, nil))
		attempts++
		rep, alloc, size := measure()
		t.Logf("a stray attempt %s after: %d points of %d s, %d KB allocated, %d bytes of JSON", stray.name, len(rep.Timeline), rep.BucketSeconds, alloc>>10, size)
		require.LessOrEqual(t, len(rep.Timeline), salereport.MaxTimeline, "a stray %s after", stray.name)
		require.Less(t, alloc, uint64(16<<20), "a stray %s after", stray.name)
		require.Less(t, size, 1<<20, "a stray %s after", stray.name)
		require.Equal(t, attempts, rep.Attempts)
		require.Equal(t, map[string]int64{"sold_out": 40, "ended": attempts - 50}, rep.Refusals)
		var sum, ended int64
		for _, b := range rep.Timeline {
			sum += b.Attempts
			ended += b.Refusals["ended"]
		}
		require.Equal(t, rep.Attempts, sum, "every attempt is in a bucket")
		require.Equal(t, attempts-50, ended)
		require.EqualValues(t, 50, rep.Timeline[0].Attempts, "the sale fits its first bucket")
		require.True(t, rep.FirstBuyAt.Equal(t0))
	}
}

func ptr(n int64) *int64 { return &n }
