package orders_test

// Regression tests of races between the reconciler or the repair and the
// shoppers, on the real Redis, PostgreSQL and Kafka (kfake) of the stack.

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// redisAndPG reads both sides' figures for one voucher.
func (e *lifeEnv) redisAndPG(t *testing.T) (redisstock.Snapshot, orders.Stats) {
	t.Helper()
	snap, err := e.stock.Snapshot(e.ctx, e.v.ID)
	require.NoError(t, err)
	st, err := e.store.Stats(e.ctx, e.v.ID)
	require.NoError(t, err)
	return snap, st
}

// An orphaned hold whose request key PostgreSQL already has under another
// order (a first attempt persisted after its gateway released it, then a
// retry whose gateway died before Kafka) is still recorded as failed and
// released: a key conflict is not "a worker owns this stock".
func TestReconcilerReleasesAnOrphanWhoseKeyAnotherOrderHas(t *testing.T) {
	t.Parallel()
	e := newLifeEnv(t, seckill.KindSeckill, 5, 5, time.Minute)
	drain := newQueue(t, 1).drain // empty: no message is in flight for anybody

	first := seckill.Reservation{OrderID: e.ids.Next(), VoucherID: e.v.ID, UserID: 1, Quantity: 1,
		RequestKey: "k1", ReservedAt: time.Now().UTC()}
	_, err := e.stock.Reserve(e.ctx, first)
	require.NoError(t, err)
	_, err = e.stock.Release(e.ctx, first.VoucherID, first.OrderID, seckill.ReleaseUnsent) // ambiguous Publish
	require.NoError(t, err)
	require.NoError(t, e.worker.Handle(e.ctx, []seckill.Reservation{first})) // the message had landed

	// The retry with the same key; its gateway dies before Kafka.
	orphan := first
	orphan.OrderID = e.ids.Next()
	res, err := e.stock.Reserve(e.ctx, orphan)
	require.NoError(t, err)
	require.Equal(t, orphan.OrderID, res.OrderID, "the key was forgotten, so this is a new hold")

	rec := orders.NewReconciler(orders.ReconcilerConfig{Record: e.store, Stock: e.stock, Drain: drain, Events: e.events,
		Grace: 200 * time.Millisecond, ProducerTimeout: 100 * time.Millisecond, Log: testLog(t)})
	time.Sleep(400 * time.Millisecond)
	for range 3 {
		_, err := rec.Voucher(e.ctx, e.v.ID)
		require.NoError(t, err)
	}

	require.Equal(t, orders.StatusFailed, e.order(t, orphan.OrderID).Status, "the orphan ends failed, without the key")
	_, live, err := e.stock.Hold(e.ctx, orphan.OrderID, []int64{e.v.ID})
	require.NoError(t, err)
	require.False(t, live, "the reconciler releases an orphaned hold (rule 3)")
	snap, _ := e.redisAndPG(t)
	require.Zero(t, snap.Pending)
	// (Redis and PostgreSQL cannot agree at the end here: the setup gives
	// the first attempt's stock back in Redis although its message lands,
	// which the buyer no longer does on an unclear write; see seckill's
	// TestBuyKeepsTheHoldWhenTheWriteIsUnclear.)
}

// repairRacer is the real pgstore RepairStore; right after Repair's second
// Voucher read it lets a shopper's cancellation run to the end (PostgreSQL
// commit, release.lua, flag cleared), as a concurrent gateway or sweeper may.
type repairRacer struct {
	orders.Record
	reads int
	race  func()
	// beforeRead runs the race before Repair's second voucher read (the two
	// reads then disagree), not after it (they agree, but are stale).
	beforeRead bool
}

func (r *repairRacer) Voucher(ctx context.Context, id int64) (seckill.Voucher, error) {
	r.reads++
	if r.reads == 2 && r.beforeRead {
		r.race()
	}
	v, err := r.Record.Voucher(ctx, id)
	if r.reads == 2 && !r.beforeRead {
		r.race()
	}
	return v, err
}

// A shopper's cancellation lands while Repair reads PostgreSQL (it is not
// blocked: cancellations go on while the voucher is off sale). Repair reads
// again, and an order cancelled after its reads is released again on the
// rebuilt keys: no cancelled order is ever written back as a hold.
func TestRepairWithACancellationDuringIt(t *testing.T) {
	t.Parallel()
	for _, beforeRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("between the reads %v", beforeRead), func(t *testing.T) {
			t.Parallel()
			repairWithACancellation(t, beforeRead)
		})
	}
}

func repairWithACancellation(t *testing.T, beforeRead bool) {
	e := newLifeEnv(t, seckill.KindSeckill, 5, 5, time.Minute)
	rs := e.buy(t, 2, 1)
	drain := newQueue(t, 1).drain

	racer := &repairRacer{Record: e.store, beforeRead: beforeRead, race: func() {
		_, err := e.life.Cancel(e.ctx, rs[0].UserID, rs[0].OrderID)
		require.NoError(t, err)
	}}
	_, err := orders.Repair(e.ctx, e.v.ID, racer, e.stock, drain, 50*time.Millisecond)
	require.NoError(t, err)

	o := e.order(t, rs[0].OrderID)
	require.Equal(t, orders.StatusCancelled, o.Status)
	require.False(t, o.ReleasePending, "the cancellation believes Redis is done")
	_, live, err := e.stock.Hold(e.ctx, rs[0].OrderID, []int64{e.v.ID})
	require.NoError(t, err)
	snap, st := e.redisAndPG(t)
	t.Logf("order %s cancelled; redis hold live=%v, redis left %d held %d; postgresql left %d sold %d",
		strconv.FormatInt(o.ID, 10), live, snap.Left, snap.Held, st.StockLeft,
		st.Quantity[orders.StatusCreated]+st.Quantity[orders.StatusPaid])
	require.False(t, live, "a cancelled order must not hold stock in Redis")
	require.Equal(t, st.StockLeft, snap.Left, "Redis and PostgreSQL must agree on what is left")
}
