package orders_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// fenceSetup is a voucher on sale in Redis and PostgreSQL, a producer on a
// topic of its own and order ids that start after the voucher's id.
func fenceSetup(t *testing.T, total int64) (*pgstore.Store, *redisstock.Store, seckill.Voucher, string, *kafkaq.Producer, *counterIDs) {
	t.Helper()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	store := pgstore.New(pool)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	now := time.Now().UTC()
	v, err := store.CreateVoucher(t.Context(), seckill.Voucher{
		Title: "Fenced", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: total, PerUserLimit: 2,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, stock.Warm)
	require.NoError(t, err)
	topic := stack.NewTopic(t, 1)
	producer, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Close() })
	ids := &counterIDs{}
	ids.n.Store(v.ID * 1000)
	return store, stock, v, topic, producer, ids
}

func orderRow(t *testing.T, store *pgstore.Store, id int64) (status string, key *string, releasePending bool) {
	t.Helper()
	require.NoError(t, store.Pool().QueryRow(t.Context(),
		`SELECT status, request_key, redis_release_pending FROM orders WHERE id = $1`, id).Scan(&status, &key, &releasePending))
	return status, key, releasePending
}

// TestFencedWriteNeverBecomesAnOrder: the broker takes a buy's message but
// answers after the buy's deadline, so the write is unclear. The buyer
// fences the order as failed in PostgreSQL, gives its stock back in Redis
// and refuses the buy (503 with a Retry-After, not "outcome unknown"). The
// message does land; the worker that gets it finds the failed row and
// creates nothing. A retry of the key is a new attempt, persisted.
func TestFencedWriteNeverBecomesAnOrder(t *testing.T) {
	ctx := t.Context()
	store, stock, v, topic, producer, ids := fenceSetup(t, 3)
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: testLog(t), OrderFences: store})

	stack.DelayProduce(t, topic, 1500*time.Millisecond)
	bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req := seckill.BuyRequest{VoucherID: v.ID, UserID: 5, Quantity: 1, RequestKey: "late"}
	_, err := buyer.Buy(bctx, req)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.NotErrorIs(t, err, seckill.ErrOutcomeUnknown, "the outcome is settled: nothing was bought")
	var ra interface{ RetryAfter() time.Duration }
	require.True(t, errors.As(err, &ra) && ra.RetryAfter() > 0, "the refusal says when to retry: %v", err)
	fenced := v.ID*1000 + 1

	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(3), snap.Left, "the stock is back at once: %+v", snap)
	require.Zero(t, snap.Pending)
	status, key, pending := orderRow(t, store, fenced)
	require.Equal(t, string(orders.StatusFailed), status)
	require.Nil(t, key, "the fence does not take the request key")
	require.False(t, pending, "the release is done")

	// The workers start; the late message is before the retry's in the
	// one partition, so once the retry is created the late one was seen.
	worker := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: stock, Events: newRedisSide(), Log: testLog(t)})
	stop := runConsumer(t, topic, "fence-workers", worker.Handle)
	defer stop()
	again, err := buyer.Buy(ctx, req)
	require.NoError(t, err)
	require.False(t, again.Replayed, "after the fence a retry of the key is a new attempt")
	require.NotEqual(t, fenced, again.OrderID)
	require.Eventually(t, func() bool {
		o, err := store.Order(ctx, again.OrderID)
		return err == nil && o.Status == orders.StatusCreated
	}, 30*time.Second, 20*time.Millisecond)

	status, _, _ = orderRow(t, store, fenced)
	require.Equal(t, string(orders.StatusFailed), status, "the late message of a fenced order made nothing")
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(2), st.StockLeft, "PostgreSQL sold one")
	require.Eventually(t, func() bool {
		s, err := stock.Snapshot(ctx, v.ID)
		return err == nil && s.Pending == 0
	}, 30*time.Second, 20*time.Millisecond)
	snap, err = stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.True(t, snap.Balanced(), "%+v", snap)
	require.Equal(t, int64(2), snap.Left, "Redis and PostgreSQL agree: %+v", snap)
	require.Equal(t, int64(1), snap.Held)
}

// ackLost is the queue of a write that lands and is persisted, but whose
// acknowledgement the gateway never gets: Publish writes through the real
// producer, waits until persisted says so, then reports a failure.
type ackLost struct {
	q         seckill.Queue
	persisted func(orderID int64) bool
}

func (a ackLost) Publish(ctx context.Context, r seckill.Reservation) error {
	if err := a.q.Publish(ctx, r); err != nil {
		return err
	}
	for !a.persisted(r.OrderID) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("order %d: the acknowledgement was lost", r.OrderID)
}

// TestFenceFindsTheOrderPersisted: the write was unclear to the gateway but a
// worker had persisted it. The fence loses, and the buy succeeds with that
// order: its hold is not given back.
func TestFenceFindsTheOrderPersisted(t *testing.T) {
	ctx := t.Context()
	store, stock, v, topic, producer, ids := fenceSetup(t, 3)
	worker := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: stock, Events: newRedisSide(), Log: testLog(t)})
	stop := runConsumer(t, topic, "fence-workers", worker.Handle)
	defer stop()
	q := ackLost{q: producer, persisted: func(id int64) bool {
		_, err := store.Order(ctx, id)
		return err == nil
	}}
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: q, IDs: ids, Log: testLog(t), OrderFences: store})

	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := buyer.Buy(bctx, seckill.BuyRequest{VoucherID: v.ID, UserID: 6, Quantity: 2, RequestKey: "k"})
	require.NoError(t, err, "the order exists: the buy succeeded")
	o, err := store.Order(ctx, res.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusCreated, o.Status)
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Left, "its hold stays: %+v", snap)
	require.Equal(t, int64(2), snap.Held)
}

// TestFenceWithoutPostgreSQL: the fence cannot reach PostgreSQL, so the
// outcome stays unknown and the hold is kept for the workers or the
// reconciler, as without a fence.
func TestFenceWithoutPostgreSQL(t *testing.T) {
	ctx := t.Context()
	_, stock, v, topic, producer, ids := fenceSetup(t, 3)
	closed, err := pgxpool.New(ctx, stack.NewDatabaseURL(t))
	require.NoError(t, err)
	closed.Close()
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: testLog(t), OrderFences: pgstore.New(closed)})

	stack.DelayProduce(t, topic, 1500*time.Millisecond)
	bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = buyer.Buy(bctx, seckill.BuyRequest{VoucherID: v.ID, UserID: 7, Quantity: 1, RequestKey: "k"})
	require.ErrorIs(t, err, seckill.ErrOutcomeUnknown)
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Held, "the hold stays while its message may land: %+v", snap)
	require.Equal(t, int64(1), snap.Pending)
}

// TestSameKeyWaitsForTheFence: two calls with one Idempotency-Key, the
// second while the first's write is unclear. The second waits until the
// first is settled: the first is fenced and refused, and the second is a
// new attempt, never a 202 with the order the first then fenced.
func TestSameKeyWaitsForTheFence(t *testing.T) {
	ctx := t.Context()
	store, stock, v, topic, producer, ids := fenceSetup(t, 3)
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: testLog(t), OrderFences: store})
	stack.DelayProduce(t, topic, 1500*time.Millisecond)
	req := seckill.BuyRequest{VoucherID: v.ID, UserID: 11, Quantity: 1, RequestKey: "twice"}

	firstErr := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := buyer.Buy(bctx, req)
		firstErr <- err
	}()
	require.Eventually(t, func() bool {
		s, err := stock.Snapshot(ctx, v.ID)
		return err == nil && s.Held == 1
	}, 5*time.Second, time.Millisecond, "the first call holds its unit")
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	second, err := buyer.Buy(bctx, req)
	require.NoError(t, err)

	err = <-firstErr
	require.ErrorIs(t, err, apperr.ErrUnavailable, "the first was fenced")
	fenced := v.ID*1000 + 1
	status, _, _ := orderRow(t, store, fenced)
	require.Equal(t, string(orders.StatusFailed), status)
	require.NotEqual(t, fenced, second.OrderID, "a 202 never names the fenced order")
	require.False(t, second.Replayed, "after the fence the key starts a new attempt")
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Held, "one unit held, the second call's: %+v", snap)
	require.Equal(t, int64(2), snap.Left)
}
