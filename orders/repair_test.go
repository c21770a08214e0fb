package orders_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Redis loses its data (FLUSHDB of a database only this test uses: the
// package shares one redis-server) while a crowd buys through Kafka; the
// drift report sees it, repair rebuilds from PostgreSQL, and the crowd,
// buying during and after, gets no more than the stock.
func TestRepairAfterRedisWiped(t *testing.T) {
	t.Parallel()
	opts := *stack.Redis(t).Options()
	opts.DB = 7
	rdb := redis.NewClient(&opts)
	defer rdb.Close()
	const total = 60
	e := newLifeEnv(t, seckill.KindSeckill, 1, 1, time.Minute) // only for its database
	e.stock = redisstock.New(redisstock.Config{Redis: rdb})
	now := time.Now().UTC()
	v, err := e.store.CreateVoucher(e.ctx, seckill.Voucher{
		Title: "Wiped", Kind: seckill.KindSeckill, PriceCents: 100, StockTotal: total, PerUserLimit: 1,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, e.stock.Warm)
	require.NoError(t, err)
	e.v = v
	e.worker = orders.NewWorker(orders.WorkerConfig{Record: e.store, Stock: e.stock, Events: e.events, PayTimeout: time.Minute, Log: testLog(t)})
	stats := orders.NewStatsService(orders.StatsConfig{Record: e.store, Stock: e.stock})

	q := newQueue(t, 3)
	runConsumer(t, q.topic, q.group, e.worker.Handle)
	buyer := seckill.NewBuyer(seckill.BuyerConfig{Stock: e.stock, Queue: q.producer, IDs: e.ids, Log: testLog(t)})

	// The crowd: 300 users, each trying until it bought or the test ends.
	// Each buy has a deadline, as a gateway's request has, and Repair is
	// told it: a write still in flight past it is not waited for.
	const buyTimeout = 3 * time.Second
	ctx, stop := context.WithCancel(e.ctx)
	var bought atomic.Int64
	var wg sync.WaitGroup
	for u := range int64(300) {
		wg.Go(func() {
			for ctx.Err() == nil {
				bctx, cancel := context.WithTimeout(ctx, buyTimeout)
				_, err := buyer.Buy(bctx, seckill.BuyRequest{VoucherID: v.ID, UserID: u + 1, Quantity: 1})
				cancel()
				if err == nil {
					bought.Add(1)
					return
				}
				if errors.Is(err, seckill.ErrLimitExceeded) {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// Waits here are generous: CI shares two cores with every other
	// package, and none of them measures speed.
	require.Eventually(t, func() bool { return bought.Load() >= total/3 }, time.Minute, 5*time.Millisecond)
	require.NoError(t, rdb.FlushDB(e.ctx).Err()) // Redis lost everything
	time.Sleep(100 * time.Millisecond)
	st, err := stats.Stats(e.ctx, v.ID)
	require.NoError(t, err)
	require.False(t, st.Drift.OK(), "the drift report sees the loss")
	t.Logf("drift after the wipe: %v", st.Drift.Problems)

	res, err := orders.Repair(e.ctx, v.ID, e.store, e.stock, q.drain, buyTimeout)
	require.NoError(t, err)
	t.Logf("repaired; %d holds of the wiped Redis recorded failed", len(res.Failed))
	require.Eventually(t, func() bool {
		st, err := e.store.Stats(e.ctx, v.ID)
		return err == nil && st.StockLeft == 0
	}, time.Minute, 20*time.Millisecond, "the crowd buys the rest after the repair")
	stop()
	wg.Wait()
	require.Eventually(t, func() bool {
		s, err := e.stock.Snapshot(e.ctx, v.ID)
		return err == nil && s.Pending == 0
	}, time.Minute, 20*time.Millisecond)

	st = e.check(t)
	sold := st.Quantity[orders.StatusCreated] + st.Quantity[orders.StatusPaid]
	require.Equal(t, int64(total), sold, "exactly the stock sold")
	final, err := stats.Stats(e.ctx, v.ID)
	require.NoError(t, err)
	require.True(t, final.Drift.OK(), "no drift: %v", final.Drift.Problems)
}
