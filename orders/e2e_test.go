package orders_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

type counterIDs struct{ n atomic.Int64 }

func (c *counterIDs) Next() int64 { return c.n.Add(1) }

// The buying path from the reservation on: real Redis (redisstock), Kafka
// (kfake) and PostgreSQL. A crowd buys more than there is; every reservation
// ends as an order or a release, and Redis and PostgreSQL agree.
func TestBuyingPathEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	store := pgstore.New(pool)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})

	const total, limit, buyers = 100, 2, 400
	now := time.Now().UTC()
	v, err := store.CreateVoucher(ctx, seckill.Voucher{
		Title: "Flash", Kind: seckill.KindSeckill, PriceCents: 500, StockTotal: total, PerUserLimit: limit,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, stock.Warm)
	require.NoError(t, err)

	// A voucher Redis sells but PostgreSQL never got (its transaction
	// failed after the warm-up): its orders must end failed and released.
	_, err = store.CreateVoucher(ctx, seckill.Voucher{
		Title: "Ghost", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: 10, PerUserLimit: 5,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, func(ctx context.Context, v seckill.Voucher) error {
		if err := stock.Warm(ctx, v); err != nil {
			return err
		}
		return errors.New("commit lost")
	})
	require.Error(t, err)
	ghostID := v.ID + 1
	_, err = store.Voucher(ctx, ghostID)
	require.ErrorIs(t, err, apperr.ErrNotFound)

	topic := stack.NewTopic(t, 6)
	producer, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(t))
	require.NoError(t, err)
	defer producer.Close()
	ids := &counterIDs{}
	ids.n.Store(v.ID * 1000) // order ids of this voucher's own
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: stock, Queue: producer, IDs: ids, Log: testLog(t)})

	redis := newRedisSide() // records the events only
	worker := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: stock, Events: redis, Log: testLog(t)})
	stop := runConsumer(t, topic, "seckill-workers", worker.Handle)

	var held, refused atomic.Int64
	var accepted sync.Map // order id -> user id
	var wg sync.WaitGroup
	for u := range int64(buyers) {
		wg.Go(func() {
			req := seckill.BuyRequest{VoucherID: v.ID, UserID: u + 1, Quantity: 1 + u%2, RequestKey: fmt.Sprintf("k%d", u)}
			for range 2 { // the second is a replay of the same key
				res, err := buyer.Buy(ctx, req)
				switch {
				case errors.Is(err, seckill.ErrSoldOut) || errors.Is(err, seckill.ErrLimitExceeded):
					refused.Add(1)
				case err != nil:
					t.Errorf("buy: %v", err)
					return
				case !res.Replayed:
					held.Add(req.Quantity)
					accepted.Store(res.OrderID, req.UserID)
				}
			}
		})
	}
	ghostOrder, err := buyer.Buy(ctx, seckill.BuyRequest{VoucherID: ghostID, UserID: 7, Quantity: 2})
	require.NoError(t, err)
	wg.Wait()
	require.Equal(t, int64(total), held.Load(), "Redis sold exactly the stock")

	// The workers persist everything; nothing stays pending in Redis.
	require.Eventually(t, func() bool {
		s1, err1 := stock.Snapshot(ctx, v.ID)
		s2, err2 := stock.Snapshot(ctx, ghostID)
		return err1 == nil && err2 == nil && s1.Pending == 0 && s2.Pending == 0 && s2.Held == 0
	}, 60*time.Second, 20*time.Millisecond)
	stop()

	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Zero(t, st.StockLeft)
	require.Equal(t, int64(total), st.Quantity[orders.StatusCreated])
	require.Zero(t, st.Orders[orders.StatusFailed])
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.True(t, snap.Balanced(), "%+v", snap)
	require.Equal(t, st.StockLeft, snap.Left, "Redis and PostgreSQL agree")
	require.Equal(t, int64(total), snap.Held)

	ghostSnap, err := stock.Snapshot(ctx, ghostID)
	require.NoError(t, err)
	require.True(t, ghostSnap.Balanced(), "%+v", ghostSnap)
	require.Equal(t, int64(10), ghostSnap.Left, "the failed order's stock is back")

	// Reads: every accepted order is readable by its owner, only by it.
	active := func(ctx context.Context, _ time.Time) ([]int64, error) {
		ids, err := store.ActiveSeckillVoucherIDs(ctx, time.Now().Add(-time.Hour))
		return append(ids, ghostID), err
	}
	reader := orders.NewReader(orders.ReaderConfig{Record: store, Stock: stock, Active: active})
	accepted.Range(func(k, val any) bool {
		o, err := reader.Get(ctx, val.(int64), k.(int64))
		require.NoError(t, err)
		require.Equal(t, orders.StatusCreated, o.Status)
		_, err = reader.Get(ctx, val.(int64)+1, k.(int64))
		require.ErrorIs(t, err, apperr.ErrNotFound)
		return true
	})
	o, err := reader.Get(ctx, 7, ghostOrder.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusFailed, o.Status)
	require.Contains(t, redis.eventsFor(ghostOrder.OrderID), orders.StatusFailed)
}

// A reservation the workers have not persisted yet reads as reserved, from
// the real Redis hold.
func TestReaderReservedFromRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	store := pgstore.New(pool)
	stock := redisstock.New(redisstock.Config{Redis: stack.Redis(t)})
	now := time.Now().UTC()
	v, err := store.CreateVoucher(ctx, seckill.Voucher{
		Title: "Flash", Kind: seckill.KindSeckill, PriceCents: 500, StockTotal: 5, PerUserLimit: 5,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, stock.Warm)
	require.NoError(t, err)

	r := seckill.Reservation{OrderID: v.ID*1000 + 1, VoucherID: v.ID, UserID: 3, Quantity: 2, ReservedAt: now}
	_, err = stock.Reserve(ctx, r)
	require.NoError(t, err)
	reader := orders.NewReader(orders.ReaderConfig{Record: store, Stock: stock, Active: func(ctx context.Context, _ time.Time) ([]int64, error) {
		return store.ActiveSeckillVoucherIDs(ctx, time.Now().Add(-time.Hour))
	}})
	o, err := reader.Get(ctx, 3, r.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusReserved, o.Status)
	require.Equal(t, int64(1000), o.AmountCents)
	_, err = reader.Get(ctx, 4, r.OrderID)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	list, err := reader.List(ctx, 3)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, orders.StatusReserved, list[0].Status)

	// Persisted: PostgreSQL wins, though Redis still holds the stock.
	_, err = store.PersistBatch(ctx, []seckill.Reservation{r}, time.Minute)
	require.NoError(t, err)
	list, err = reader.List(ctx, 3)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, orders.StatusCreated, list[0].Status)
}
