package orders_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/redisstock/redisstocktest"
)

// A gateway "dies" after reserve.lua and before Kafka: its hold has no
// message. Another hold's message is on Kafka but the workers lag (slow but
// alive). While they lag, nothing is released; once they catch up, the
// orphan is released within the grace period and recorded as failed, and
// the slow one becomes an order.
func TestReconcilerOrphanAndSlowMessage(t *testing.T) {
	t.Parallel()
	e := newLifeEnv(t, seckill.KindSeckill, 10, 5, time.Minute)
	q := newQueue(t, 3)

	const grace = time.Second
	rec := orders.NewReconciler(orders.ReconcilerConfig{Record: e.store, Stock: e.stock, Drain: q.drain, Events: e.events,
		Grace: grace, ProducerTimeout: 300 * time.Millisecond, Log: testLog(t),
	})

	slow := e.reserve(t, 1, 2)
	require.NoError(t, q.producer.Publish(e.ctx, slow))
	orphan := e.reserve(t, 2, 3) // the gateway died here
	time.Sleep(grace + 100*time.Millisecond)

	// The workers are not consuming: neither hold may be released, because
	// the orphan's message could be among the unconsumed ones.
	for range 2 {
		released, err := rec.Voucher(e.ctx, e.v.ID)
		require.NoError(t, err)
		require.Empty(t, released)
	}
	snap, err := e.stock.Snapshot(e.ctx, e.v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(5), snap.Held)
	require.Equal(t, int64(2), snap.Pending)

	// The workers come back.
	runConsumer(t, q.topic, q.group, e.worker.Handle)
	var released []orders.Order
	require.Eventually(t, func() bool {
		list, err := rec.Voucher(e.ctx, e.v.ID)
		require.NoError(t, err)
		released = append(released, list...)
		return len(released) > 0
	}, 10*time.Second, 50*time.Millisecond)
	t.Logf("orphan released %s after its reservation (grace %s)", time.Since(orphan.ReservedAt).Round(time.Millisecond), grace)
	require.Len(t, released, 1)
	require.Equal(t, orphan.OrderID, released[0].ID)
	require.Equal(t, orders.StatusFailed, released[0].Status)
	require.Equal(t, []orders.Status{orders.StatusFailed}, e.events.eventsFor(orphan.OrderID))
	require.Equal(t, orders.StatusCreated, e.order(t, slow.OrderID).Status)
	o := e.order(t, orphan.OrderID)
	require.Equal(t, orders.StatusFailed, o.Status)
	require.False(t, o.ReleasePending)

	// A second pass finds nothing; the invariant holds.
	list, err := rec.Voucher(e.ctx, e.v.ID)
	require.NoError(t, err)
	require.Empty(t, list)
	st := e.check(t)
	require.Equal(t, int64(8), st.StockLeft)
}

// A worker persisted a hold and died before confirming it in Redis: the
// reconciler leaves the order alone, releases nothing, and takes the hold off
// the pending list so later passes do not look at it again.
func TestReconcilerConfirmsPersistedButUnconfirmedHolds(t *testing.T) {
	t.Parallel()
	e := newLifeEnv(t, seckill.KindSeckill, 10, 5, time.Minute)
	drain := newQueue(t, 1).drain
	rec := orders.NewReconciler(orders.ReconcilerConfig{Record: e.store, Stock: e.stock, Drain: drain, Events: e.events,
		Grace: 200 * time.Millisecond, ProducerTimeout: 100 * time.Millisecond, Log: testLog(t),
	})

	h := e.reserve(t, 1, 2)
	_, err := e.store.PersistBatch(e.ctx, []seckill.Reservation{h}, time.Minute)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	released, err := rec.Voucher(e.ctx, e.v.ID)
	require.NoError(t, err)
	require.Empty(t, released, "an order PostgreSQL has is never released by the reconciler")
	snap, err := e.stock.Snapshot(e.ctx, e.v.ID)
	require.NoError(t, err)
	require.Zero(t, snap.Pending, "the persisted hold is confirmed")
	require.Equal(t, int64(2), snap.Held)
	require.Equal(t, orders.StatusCreated, e.order(t, h.OrderID).Status)
	e.check(t)
}

// A voucher of 4 shards whose mover died between the two steps of a stock
// move (the donor bucket debited, the home bucket not credited): the
// reconciler's pass credits the move once, and Redis balances again with
// all of the stock sellable.
func TestReconcilerFinishesHalfDoneMoves(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	store := pgstore.New(pool)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	now := time.Now().UTC()
	v, err := store.CreateVoucher(ctx, seckill.Voucher{
		Title: "Split", Kind: seckill.KindSeckill, PriceCents: 250, StockTotal: 40, PerUserLimit: 5, Shards: 4,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, stock.Warm)
	require.NoError(t, err)
	require.Equal(t, int64(6), redisstocktest.HalfMove(t, stack.Redis(t), v.ID, 3, 0, 6, "died"))
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(6), snap.Moving)
	require.True(t, snap.Balanced(), "stock on its way still balances: %+v", snap)

	// No hold is pending, so the reconciler never asks a queue.
	rec := orders.NewReconciler(orders.ReconcilerConfig{Record: store, Stock: stock, Log: testLog(t)})
	_, err = rec.Voucher(ctx, v.ID)
	require.NoError(t, err)
	snap, err = stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 40, Total: 40}, snap)
	require.Equal(t, int64(16), redisstocktest.BucketStock(t, stack.Redis(t), v.ID, 0), "bucket 0's 10 and the 6 moved to it")
	n, err := stock.FinishMoves(ctx, v.ID)
	require.NoError(t, err)
	require.Zero(t, n, "credited once")
}
