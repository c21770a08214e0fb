package orders_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
)

// heldLister is the real store's list of active vouchers, counted, whose
// reads wait for the test to let them finish.
type heldLister struct {
	*pgstore.Store
	reads atomic.Int64
	gate  chan struct{} // a read finishes after a receive from it
}

func (h *heldLister) ActiveSeckillVoucherIDs(ctx context.Context, since time.Time) ([]int64, error) {
	h.reads.Add(1)
	<-h.gate
	return h.Store.ActiveSeckillVoucherIDs(ctx, since)
}

// A read of the active vouchers forced by a fresh order id holds no lock
// across its query: a reader content with the cached copy (every order
// list) is answered while the query runs, and the many callers that need
// a newer copy share one query instead of queuing one each behind it.
func TestActiveCacheSharesItsRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 100, 10)
	src := &heldLister{Store: store, gate: make(chan struct{})}
	cache := orders.NewActiveCache(src, time.Hour)
	close(src.gate)
	ids, err := cache.IDs(ctx, time.Time{})
	require.NoError(t, err)
	require.Contains(t, ids, v.ID)
	src.gate = make(chan struct{})

	// 50 lookups of fresh order ids, each needing a copy read from now on.
	var wg sync.WaitGroup
	for range 50 {
		since := time.Now()
		wg.Go(func() {
			ids, err := cache.IDs(ctx, since)
			if err != nil || len(ids) != 1 {
				t.Errorf("ids %v, err %v", ids, err)
			}
		})
	}
	require.Eventually(t, func() bool { return src.reads.Load() >= 2 }, 20*time.Second, time.Millisecond)

	listed := make(chan error, 1)
	go func() {
		_, err := cache.IDs(ctx, time.Time{})
		listed <- err
	}()
	select {
	case err := <-listed:
		require.NoError(t, err, "the cached copy answers while a refresh runs")
	case <-time.After(20 * time.Second):
		t.Fatal("a reader content with the cached copy waited for a refresh's query")
	}
	close(src.gate)
	wg.Wait()
	require.LessOrEqual(t, src.reads.Load(), int64(3), "the waiting lookups shared their queries")
}
