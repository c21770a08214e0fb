package salereport_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/orders/salereport"
)

// countingWriter counts what it is given and keeps none of it.
type countingWriter struct{ n, lines int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	for _, c := range p {
		if c == '\n' {
			w.lines++
		}
	}
	return len(p), nil
}

// BenchmarkOrdersExportMillion exports a voucher's 1,000,000 orders and
// reports the heap at its highest meanwhile (the export streams, so the
// heap stays far below the CSV's size), then how long the report's order
// figures take over them.
//
//	go test -run '^$' -bench OrdersExportMillion -benchtime 1x ./orders/salereport
func BenchmarkOrdersExportMillion(b *testing.B) {
	ctx := context.Background()
	pool := stack.NewDatabase(b)
	store := pgstore.New(pool)
	v := pgstoretest.NewVoucher(b, store, 1_000_000, 1)
	_, err := pool.Exec(ctx, `
		INSERT INTO orders (id, voucher_id, user_id, quantity, amount_cents, status, reserved_at, pay_deadline)
		SELECT 5000000000 + g, $1, g, 1, 250, CASE WHEN g % 3 = 0 THEN 'paid' ELSE 'created' END,
		       now() - interval '1 hour' + g * interval '1 millisecond', now() + interval '1 hour'
		FROM generate_series(1, 1000000) g`, v.ID)
	require.NoError(b, err)
	reports := salereport.NewReports(store)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	var w countingWriter
	b.ResetTimer()
	for b.Loop() {
		w = countingWriter{}
		require.NoError(b, reports.WriteOrdersCSV(ctx, v.ID, &w))
	}
	b.StopTimer()
	close(stop)
	<-sampled
	require.EqualValues(b, 1_000_001, w.lines, "a header and a line per order")
	b.ReportMetric(float64(w.n)/(1<<20), "csv-MB")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(before.HeapInuse)/(1<<20), "heap-before-MB")

	// The report's figures over the same million orders, for scale.
	start := time.Now()
	rep, err := reports.Report(ctx, v.ID)
	require.NoError(b, err)
	require.EqualValues(b, 1_000_000, rep.Bought)
	require.NotNil(b, rep.SoldOutAt)
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "report-ms")
}
