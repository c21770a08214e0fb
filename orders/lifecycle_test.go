package orders_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// lifeEnv is one voucher on real Redis and PostgreSQL with the lifecycle
// around it. Orders are made by reserving in Redis and handing the
// reservation to a real Worker, as the Kafka consumer would.
type lifeEnv struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	store  *pgstore.Store
	stock  *redisstock.Store
	events *redisSide
	life   *orders.Lifecycle
	worker *orders.Worker
	v      seckill.Voucher
	ids    *counterIDs
}

func newLifeEnv(t testing.TB, kind seckill.Kind, total, limit int64, payTimeout time.Duration) *lifeEnv {
	t.Helper()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	pgstoretest.SpreadVoucherIDs(t, pool) // the tests share one Redis
	e := &lifeEnv{ctx: ctx, pool: pool, store: pgstore.New(pool), stock: redisstock.New(redisstock.Config{Redis: stack.Redis(t)}), events: newRedisSide(), ids: &counterIDs{}}
	now := time.Now().UTC()
	warm := e.stock.Warm
	if kind != seckill.KindSeckill {
		warm = nil
	}
	var err error
	e.v, err = e.store.CreateVoucher(ctx, seckill.Voucher{
		Title: "Lifecycle", Kind: kind, PriceCents: 250, StockTotal: total, PerUserLimit: limit,
		BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour),
	}, nil, warm)
	require.NoError(t, err)
	e.ids.n.Store(e.v.ID * 1000) // order ids of this voucher's own
	e.life = orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: e.stock, Events: e.events, Log: testLog(t)})
	e.worker = orders.NewWorker(orders.WorkerConfig{Record: e.store, Stock: e.stock, Events: e.events, PayTimeout: payTimeout, Log: testLog(t)})
	return e
}

// reserve holds stock in Redis only (as the gateway does before Kafka).
func (e *lifeEnv) reserve(t testing.TB, user, qty int64) seckill.Reservation {
	t.Helper()
	r := seckill.Reservation{OrderID: e.ids.Next(), VoucherID: e.v.ID, UserID: user, Quantity: qty, ReservedAt: time.Now().UTC()}
	_, err := e.stock.Reserve(e.ctx, r)
	require.NoError(t, err)
	return r
}

// buy makes created orders: reserved in Redis, persisted by the worker.
func (e *lifeEnv) buy(t testing.TB, n int, qty int64) []seckill.Reservation {
	t.Helper()
	rs := make([]seckill.Reservation, n)
	for i := range rs {
		rs[i] = e.reserve(t, int64(i+1), qty)
	}
	for i := 0; i < n; i += 100 {
		require.NoError(t, e.worker.Handle(e.ctx, rs[i:min(i+100, n)]))
	}
	return rs
}

// check asserts sold + held + left == total in PostgreSQL and in Redis, and
// that they agree, with nothing in flight.
func (e *lifeEnv) check(t testing.TB) orders.Stats {
	t.Helper()
	st, err := e.store.Stats(e.ctx, e.v.ID)
	require.NoError(t, err)
	sold := st.Quantity[orders.StatusCreated] + st.Quantity[orders.StatusPaid]
	require.Equal(t, st.StockTotal, st.StockLeft+sold, "PostgreSQL: left + sold == total")
	if e.v.Kind == seckill.KindSeckill {
		snap, err := e.stock.Snapshot(e.ctx, e.v.ID)
		require.NoError(t, err)
		require.True(t, snap.Balanced(), "Redis balanced: %+v", snap)
		require.Equal(t, int64(0), snap.Pending, "nothing in flight")
		require.Equal(t, sold, snap.Held, "Redis holds what PostgreSQL sold")
		require.Equal(t, st.StockLeft, snap.Left, "Redis and PostgreSQL agree on what is left")
	}
	return st
}

func (e *lifeEnv) order(t testing.TB, id int64) orders.Order {
	t.Helper()
	o, err := e.store.Order(e.ctx, id)
	require.NoError(t, err)
	return o
}

func TestPayAndCancel(t *testing.T) {
	t.Parallel()
	e := newLifeEnv(t, seckill.KindSeckill, 10, 5, time.Second)
	rs := e.buy(t, 4, 2)
	ctx := e.ctx

	// Pay before the deadline.
	o, err := e.life.Pay(ctx, rs[0].UserID, rs[0].OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusPaid, o.Status)
	again, err := e.life.Pay(ctx, rs[0].UserID, rs[0].OrderID)
	require.NoError(t, err, "paying a paid order is a retry")
	require.Equal(t, o, again, "the paid order, unchanged")

	// Someone else's order: not found, for pay and cancel.
	_, err = e.life.Pay(ctx, rs[2].UserID, rs[1].OrderID)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	_, err = e.life.Cancel(ctx, rs[2].UserID, rs[1].OrderID)
	require.ErrorIs(t, err, apperr.ErrNotFound)
	_, err = e.life.Cancel(ctx, 1, 42)
	require.ErrorIs(t, err, apperr.ErrNotFound)

	// Cancel twice: stock back once, the second answer is the same order.
	o, err = e.life.Cancel(ctx, rs[1].UserID, rs[1].OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusCancelled, o.Status)
	require.False(t, o.ReleasePending)
	again, err = e.life.Cancel(ctx, rs[1].UserID, rs[1].OrderID)
	require.NoError(t, err, "cancelling a cancelled order is a retry")
	require.Equal(t, o.ID, again.ID)
	require.Equal(t, orders.StatusCancelled, again.Status)
	st := e.check(t)
	require.Equal(t, int64(4), st.StockLeft)

	// Cancel a paid order: conflict; pay a cancelled one: conflict.
	_, err = e.life.Cancel(ctx, rs[0].UserID, rs[0].OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict)
	_, err = e.life.Pay(ctx, rs[1].UserID, rs[1].OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict)

	// After the deadline: 409 even before the sweeper came.
	time.Sleep(1100 * time.Millisecond)
	_, err = e.life.Pay(ctx, rs[2].UserID, rs[2].OrderID)
	require.ErrorIs(t, err, apperr.ErrConflict)
	list, err := e.life.CancelExpired(ctx, 100)
	require.NoError(t, err)
	require.Len(t, list, 2)
	st = e.check(t)
	require.Equal(t, int64(8), st.StockLeft)
	// Each transition announced once, retries not at all.
	require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusPaid}, e.events.eventsFor(rs[0].OrderID))
	require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusCancelled}, e.events.eventsFor(rs[1].OrderID))
	require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusCancelled}, e.events.eventsFor(rs[2].OrderID))

	// The buyer's per-user count is back too: user 2 may buy its limit again.
	_, err = e.stock.Reserve(ctx, seckill.Reservation{OrderID: e.ids.Next(), VoucherID: e.v.ID, UserID: rs[1].UserID, Quantity: 5})
	require.NoError(t, err)
}

// Pay and the payment timeout fired together 200 times: exactly one winner
// each time, and the stock counted once.
func TestPayTimeoutRace(t *testing.T) {
	t.Parallel()
	const n = 200
	e := newLifeEnv(t, seckill.KindSeckill, n, 1, 700*time.Millisecond)
	rs := e.buy(t, n, 1)
	deadline := e.order(t, rs[n-1].OrderID).PayDeadline

	var paid sync.Map
	cancelled := map[int64]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	time.Sleep(time.Until(deadline) - 30*time.Millisecond)
	for _, r := range rs {
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
			o, err := e.life.Pay(e.ctx, r.UserID, r.OrderID)
			if err == nil {
				paid.Store(o.ID, true)
				return
			}
			if !errors.Is(err, apperr.ErrConflict) {
				t.Errorf("pay %d: %v", r.OrderID, err)
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
				list, err := e.life.CancelExpired(e.ctx, 20)
				if err != nil {
					t.Errorf("sweep: %v", err)
					return
				}
				mu.Lock()
				for _, o := range list {
					cancelled[o.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	list, err := e.life.CancelExpired(e.ctx, n)
	require.NoError(t, err)
	for _, o := range list {
		cancelled[o.ID]++
	}

	var nPaid int
	for _, r := range rs {
		_, p := paid.Load(r.OrderID)
		c := cancelled[r.OrderID]
		require.True(t, (p && c == 0) || (!p && c == 1), "order %d: paid %v, cancelled %d times", r.OrderID, p, c)
		if p {
			nPaid++
			require.Equal(t, orders.StatusPaid, e.order(t, r.OrderID).Status)
		}
	}
	t.Logf("race: %d paid, %d cancelled", nPaid, n-nPaid)
	st := e.check(t)
	require.Equal(t, int64(nPaid), st.Quantity[orders.StatusPaid])
	require.Equal(t, int64(n-nPaid), st.StockLeft)
}

// flakyReleaser fails the Redis release while down is set: a process that
// died between its PostgreSQL commit and the Redis step.
type flakyReleaser struct {
	*redisstock.Store
	down  atomic.Bool
	calls atomic.Int64
}

func (f *flakyReleaser) Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return false, errors.New("redis unreachable")
	}
	return f.Store.Release(ctx, voucherID, orderID, mode)
}

// The sweeper killed mid-batch (contexts cut at random points, Redis step
// failing after the commit) and restarted: every expired order is cancelled
// once and its stock back once, in both stores. Two sweepers run in parallel
// throughout, and no order is cancelled twice.
func TestSweeperKilledAndParallel(t *testing.T) {
	t.Parallel()
	const n = 300
	e := newLifeEnv(t, seckill.KindSeckill, n, 1, 300*time.Millisecond)
	rs := e.buy(t, n, 1)
	time.Sleep(400 * time.Millisecond)

	flaky := &flakyReleaser{Store: e.stock}
	flaky.down.Store(true)
	dying := orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: flaky, Events: e.events, Log: testLog(t)})
	// Killed mid-batch: contexts cut after a random few milliseconds.
	for range 10 {
		ctx, cancel := context.WithTimeout(e.ctx, time.Duration(1+rand.IntN(8))*time.Millisecond)
		_, _ = dying.CancelExpired(ctx, 25)
		cancel()
	}
	// Killed after committing, before Redis: rows stay flagged. One pass,
	// right after the killed ones, was once seen to cancel nothing on a
	// busy machine (the cause is not known; a sweeper's next pass takes
	// what one missed): the test needs flagged rows, so it passes again.
	var pending []orders.Order
	var passErr, readErr error
	require.Eventually(t, func() bool {
		if _, passErr = dying.CancelExpired(e.ctx, 25); passErr != nil {
			return false
		}
		pending, readErr = e.store.ReleasePending(e.ctx, n)
		return readErr == nil && len(pending) > 0
	}, 5*time.Second, 20*time.Millisecond, "cancelled in PostgreSQL, release owed in Redis (last pass: %v, %v)", passErr, readErr)

	// Restarted: two sweepers in parallel finish the job.
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	for range 2 {
		s := orders.NewSweeper(orders.SweeperConfig{Lifecycle: e.life, Interval: 50 * time.Millisecond, Batch: 40, Log: testLog(t)})
		wg.Go(func() { _ = s.Run(ctx) })
	}
	require.Eventually(t, func() bool {
		st, err := e.store.Stats(e.ctx, e.v.ID)
		pend, err2 := e.store.ReleasePending(e.ctx, 1)
		return err == nil && err2 == nil && st.Orders[orders.StatusCancelled] == n && len(pend) == 0
	}, 10*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	for _, r := range rs {
		require.Equal(t, []orders.Status{orders.StatusCreated, orders.StatusCancelled}, e.events.eventsFor(r.OrderID),
			"order %d: one cancellation", r.OrderID)
	}
	st := e.check(t)
	require.Equal(t, int64(n), st.StockLeft)
}

// TestSweeperThroughput measures how fast one sweeper cancels expired
// orders and the longest delay between a deadline and its cancellation.
func TestSweeperThroughput(t *testing.T) {
	t.Parallel()
	const n = 2000
	e := newLifeEnv(t, seckill.KindSeckill, n, 1, 2*time.Second)
	rs := e.buy(t, n, 1)
	deadlines := make(map[int64]time.Time, n)
	for _, r := range rs {
		deadlines[r.OrderID] = e.order(t, r.OrderID).PayDeadline
	}

	var mu sync.Mutex
	var maxDelay time.Duration
	var first, last time.Time
	rec := &delayRecorder{fn: func(ev orders.Event) {
		if ev.Order.Status != orders.StatusCancelled {
			return
		}
		d := ev.At.Sub(deadlines[ev.Order.ID])
		mu.Lock()
		defer mu.Unlock()
		maxDelay = max(maxDelay, d)
		if first.IsZero() {
			first = ev.At
		}
		last = ev.At
	}}
	life := orders.NewLifecycle(orders.LifecycleConfig{Record: e.store, Stock: e.stock, Events: rec, Log: testLog(t)})
	ctx, cancel := context.WithCancel(e.ctx)
	s := orders.NewSweeper(orders.SweeperConfig{Lifecycle: life, Log: testLog(t)})
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	require.Eventually(t, func() bool {
		st, err := e.store.Stats(e.ctx, e.v.ID)
		pend, err2 := e.store.ReleasePending(e.ctx, 1)
		return err == nil && err2 == nil && st.Orders[orders.StatusCancelled] == n && len(pend) == 0
	}, 30*time.Second, 50*time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	span := last.Sub(first)
	t.Logf("sweeper: %d orders cancelled (PostgreSQL + Redis release + event) in %s after the first: %.0f orders/s; max deadline→cancel delay %s (tick 1 s)",
		n, span.Round(time.Millisecond), float64(n)/max(span.Seconds(), 0.001), maxDelay.Round(time.Millisecond))
	// The delay is reported, not asserted: on a busy machine it measured
	// 5.8 s against 1.4 s idle, and a test must not time the machine. That
	// every order was cancelled (within the 30 s above) is the assertion.
	mu.Unlock()
	e.check(t)
}

type delayRecorder struct{ fn func(orders.Event) }

func (d *delayRecorder) Publish(_ context.Context, e orders.Event) error { d.fn(e); return nil }
