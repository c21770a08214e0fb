package edge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// After the last item, further buys are answered from memory without a
// reservation reaching Redis; a release elsewhere (the sweeper, another
// instance) puts the voucher back on sale on every instance within 1s.
func TestSoldOutFromMemoryAndBackOnSale(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 3)
	ctx := context.Background()

	type instance struct {
		e     *edge.Edge
		stock *countingStock
		buy   func(user int64) (int64, error)
	}
	start := func() *instance {
		e, _ := newEdge(t, rdb, edge.Config{})
		cs := &countingStock{Store: redisstock.New(redisstock.Config{Redis: rdb})}
		buy := chain(e.Steps(), v, buyWith(realBuyer(t, cs)))
		return &instance{e: e, stock: cs, buy: func(u int64) (int64, error) {
			p, err := buy(ctx, attempt(v.ID, u))
			return p.OrderID, err
		}}
	}
	a, b := start(), start()

	var orders []int64
	for u := range int64(3) {
		id, err := a.buy(u + 1)
		require.NoError(t, err)
		orders = append(orders, id)
	}
	require.True(t, a.e.SoldOut.IsFlagged(v.ID), "the last item's reservation said 0 left")
	for u := range int64(1000) {
		_, err := a.buy(u + 10)
		require.ErrorIs(t, err, seckill.ErrSoldOut)
	}
	require.EqualValues(t, 3, a.stock.reserves.Load(), "sold-out answers reached Redis")

	// b learns from its own refusal (which says 0 left).
	_, err := b.buy(100)
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	require.True(t, b.e.SoldOut.IsFlagged(v.ID))
	for u := range int64(100) {
		_, err := b.buy(u + 200)
		require.ErrorIs(t, err, seckill.ErrSoldOut)
	}
	require.EqualValues(t, 1, b.stock.reserves.Load())

	// A release outside both instances whose announcement is lost: only
	// the re-check tells them.
	released, err := redisstock.New(redisstock.Config{Redis: rdb, NoStockAnnouncements: true}).Release(ctx, v.ID, orders[0], seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, released)
	began := time.Now()
	require.Eventually(t, func() bool {
		return !a.e.SoldOut.IsFlagged(v.ID) && !b.e.SoldOut.IsFlagged(v.ID)
	}, time.Second, 5*time.Millisecond)
	t.Logf("back on sale on both instances after %v", time.Since(began))
	_, err = b.buy(999)
	require.NoError(t, err, "the returned item sells")
	require.True(t, b.e.SoldOut.IsFlagged(v.ID))
	_, err = a.buy(1000)
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	require.True(t, a.e.SoldOut.IsFlagged(v.ID))
}

// The gateway's buyer drops StockLeft on a refusal; without the observed
// stock the gate still learns, from ErrSoldOut confirmed by its re-check.
func TestSoldOutLearnsWithoutObservedStock(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 1)
	e, _ := newEdge(t, rdb, edge.Config{})
	var reserves atomic.Int64
	cs := &countingStock{Store: redisstock.New(redisstock.Config{Redis: rdb})}
	buy := chain(e.Steps(), v, buyWith(realBuyer(t, cs)))
	ctx := context.Background()
	_, err := buy(ctx, attempt(v.ID, 1))
	require.NoError(t, err)
	_, err = buy(ctx, attempt(v.ID, 2))
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	require.Eventually(t, func() bool { return e.SoldOut.IsFlagged(v.ID) }, time.Second, 5*time.Millisecond)
	before := cs.reserves.Load()
	for u := range int64(100) {
		_, err := buy(ctx, attempt(v.ID, u+3))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
	}
	require.Equal(t, before, cs.reserves.Load())
	_ = reserves.Load()

	// A voucher sold out only for a bigger quantity is not flagged.
	w := warm(t, rdb, 2)
	buyW := chain(e.Steps(), w, buyWith(realBuyer(t, cs)))
	a := attempt(w.ID, 1)
	a.Request.Quantity = 3
	_, err = buyW(ctx, a)
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	time.Sleep(700 * time.Millisecond)
	require.False(t, e.SoldOut.IsFlagged(w.ID))
}

// A release announced on the stock channel is learned at once.
func TestSoldOutAnnouncement(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 1)
	e, _ := newEdge(t, rdb, edge.Config{SoldOutRecheck: time.Hour})
	cs := &countingStock{Store: redisstock.New(redisstock.Config{Redis: rdb})}
	buy := chain(e.Steps(), v, buyWith(realBuyer(t, cs)))
	ctx := context.Background()
	p, err := buy(ctx, attempt(v.ID, 1))
	require.NoError(t, err)
	require.True(t, e.SoldOut.IsFlagged(v.ID))
	_, err = redisstock.New(redisstock.Config{Redis: rdb, NoStockAnnouncements: true}).Release(ctx, v.ID, p.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	require.True(t, e.SoldOut.IsFlagged(v.ID), "no announcement yet, and no re-check for an hour")
	require.NoError(t, redisstock.NewAnnouncer(rdb).AnnounceStock(ctx, v.ID))
	require.Eventually(t, func() bool { return !e.SoldOut.IsFlagged(v.ID) }, 200*time.Millisecond, 2*time.Millisecond)
}

// A sold-out voucher still owes every accepted Idempotency-Key its first
// order: replays get it (from memory, once the keys are copied), new keys get
// sold out, and neither reaches the reservation script.
func TestSoldOutStillReplaysKnownKeys(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 2)
	ctx := context.Background()
	e, cs, keyed := keyedBuys(t, rdb, v)

	first, err := keyed(1, "k-one")
	require.NoError(t, err)
	second, err := keyed(2, "k-two")
	require.NoError(t, err)
	require.True(t, e.SoldOut.IsFlagged(v.ID))

	// Straight after the flag, before the keys are copied: the script replays.
	again, err := keyed(1, "k-one")
	require.NoError(t, err)
	require.Equal(t, first, again)

	// Once copied (the re-check loop), replays and refusals come from memory.
	require.Eventually(t, func() bool {
		before := cs.reserves.Load()
		id, err := keyed(2, "k-two")
		return err == nil && id == second && cs.reserves.Load() == before
	}, 3*time.Second, 20*time.Millisecond, "a known key is replayed from memory")
	before := cs.reserves.Load()
	for u := range int64(50) {
		_, err := keyed(u+10, "fresh")
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		id, err := keyed(1, "k-one")
		require.NoError(t, err)
		require.Equal(t, first, id)
	}
	_, err = keyed(2, "k-one") // the same key from another user is another attempt
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	require.Equal(t, before, cs.reserves.Load(), "neither replays nor refusals reached the script")

	// Stock back: the copy goes with the flag, and a new key buys.
	released, err := redisstock.New(redisstock.Config{Redis: rdb}).Release(ctx, v.ID, second, seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, released)
	require.Eventually(t, func() bool { return !e.SoldOut.IsFlagged(v.ID) }, time.Second, 5*time.Millisecond)
	third, err := keyed(3, "k-three")
	require.NoError(t, err)
	require.NotZero(t, third)
}

// A sold-out voucher's copy of its request keys answers only the orders that
// were decided when it was made (seckill/RULES.md, "A 202 stands"): the
// replay of the last unit's order, which another gateway is still deciding
// (its Kafka write on its way), goes on to the script, which refuses it 503
// until that gateway promises the order, and then replays it. Answered from
// the copy, it would be a 202 for an order that gateway may yet fence.
func TestSoldOutCopiesOnlyDecidedOrders(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	v := warm(t, rdb, 2)
	ctx := context.Background()
	e, cs, keyed := keyedBuys(t, rdb, v)

	first, err := keyed(1, "k-one")
	require.NoError(t, err)
	// The last unit, held by another gateway whose write is on its way.
	other := redisstock.New(redisstock.Config{Redis: rdb})
	last := seckill.Reservation{OrderID: rand.Int64N(1<<50) + 1, VoucherID: v.ID, UserID: 2, Quantity: 1,
		RequestKey: "k-two", ReservedAt: time.Now()}
	_, err = other.Reserve(ctx, last)
	require.NoError(t, err)
	_, err = keyed(3, "k-three")
	require.ErrorIs(t, err, seckill.ErrSoldOut)
	require.Eventually(t, func() bool {
		before := cs.reserves.Load()
		id, err := keyed(1, "k-one")
		return e.SoldOut.IsFlagged(v.ID) && err == nil && id == first && cs.reserves.Load() == before
	}, 3*time.Second, 20*time.Millisecond, "flagged, and a decided key is replayed from the copy")

	before := cs.reserves.Load()
	_, err = keyed(2, "k-two")
	require.ErrorIs(t, err, seckill.ErrUndecided, "never a 202 for an undecided order")
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.Greater(t, cs.reserves.Load(), before, "the script was asked, not the copy")

	require.NoError(t, other.Promise(ctx, last))
	id, err := keyed(2, "k-two")
	require.NoError(t, err)
	require.Equal(t, last.OrderID, id, "promised, it is replayed")
}

// keyedBuys is one instance's gates and the production buyer over v, on
// rdb: keyed buys one unit with a user's Idempotency-Key through the whole
// pipeline, and the stock counts the reservation scripts that ran.
func keyedBuys(t *testing.T, rdb redis.UniversalClient, v seckill.Voucher) (*edge.Edge, *countingStock, func(user int64, key string) (int64, error)) {
	t.Helper()
	e, _ := newEdge(t, rdb, edge.Config{})
	cs := &countingStock{Store: redisstock.New(redisstock.Config{Redis: rdb})}
	buy := chain(e.Steps(), v, buyWith(realBuyer(t, cs)))
	return e, cs, func(user int64, key string) (int64, error) {
		a := attempt(v.ID, user)
		a.Request.RequestKey = key
		p, err := buy(context.Background(), a)
		return p.OrderID, err
	}
}

// The pipeline tells the flag every seller's answer: a reservation that
// took the last unit flags the voucher, and the same reservation given back
// because it could not be queued puts the voucher back on sale here at once,
// before any announcement or re-check.
func TestSoldOutSawReleaseOfUnqueued(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{SoldOutRecheck: time.Hour})
	const v = 77
	e.SoldOut.Saw(v, pipe.Sale{StockKnown: true, StockLeft: 0}, nil)
	require.True(t, e.SoldOut.IsFlagged(v), "the last unit was taken")
	e.SoldOut.Saw(v, pipe.Sale{}, fmt.Errorf("%w: queue: %w", apperr.ErrUnavailable, seckill.ErrNotQueued))
	require.False(t, e.SoldOut.IsFlagged(v), "the unqueued reservation was given back")
	e.SoldOut.Saw(v, pipe.Sale{StockKnown: true, StockLeft: 2}, nil)
	require.False(t, e.SoldOut.IsFlagged(v), "units are left")
}
