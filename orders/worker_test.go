package orders_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/kafkaq/kafkaqtest"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/testlog"
)

// The Redis side of the worker, recorded in memory: these tests are about
// PostgreSQL and Kafka (redisstock has its own tests against real Redis).
type redisSide struct {
	// The rest of the stock: the worker uses no more of it.
	orders.Stock

	mu        sync.Mutex
	confirmed map[int64]int
	released  map[int64]int
	modes     map[int64]seckill.ReleaseMode // of each order's first release
	events    []orders.Event
	fail      error // returned by Confirm and Release while set
}

func newRedisSide() *redisSide {
	return &redisSide{confirmed: map[int64]int{}, released: map[int64]int{}, modes: map[int64]seckill.ReleaseMode{}}
}

func (s *redisSide) Confirm(_ context.Context, rs []seckill.Reservation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, r := range rs {
		s.confirmed[r.OrderID]++
	}
	return nil
}

func (s *redisSide) Release(_ context.Context, _, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return false, s.fail
	}
	if mode != seckill.ReleaseAny && mode != seckill.ReleaseRefused {
		return false, errors.New("unexpected release mode")
	}
	if s.released[orderID] == 0 {
		s.modes[orderID] = mode
	}
	s.released[orderID]++
	return s.released[orderID] == 1, nil
}

func (s *redisSide) Publish(_ context.Context, e orders.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	return nil
}

func (s *redisSide) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *redisSide) confirmedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.confirmed)
}

func (s *redisSide) eventsFor(id int64) []orders.Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []orders.Status
	for _, e := range s.events {
		if e.Order.ID == id {
			out = append(out, e.Order.Status)
		}
	}
	return out
}

func testLog(t testing.TB) *slog.Logger {
	return testlog.Logger(t, slog.LevelInfo)
}

func TestWorkerHandle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 10, 2)
	redis := newRedisSide()
	var failed []int64
	w := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redis, Events: redis, PayTimeout: time.Minute, Log: testLog(t),
		Failed: func(r seckill.Reservation) { failed = append(failed, r.OrderID) }})

	good1, good2 := pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 2, 2)
	bad := pgstoretest.Reservation(v.ID+100, 3, 1)
	batch := []seckill.Reservation{good1, bad, good2}
	require.NoError(t, w.Handle(ctx, batch))

	for _, r := range []seckill.Reservation{good1, good2} {
		o, err := store.Order(ctx, r.OrderID)
		require.NoError(t, err)
		require.Equal(t, orders.StatusCreated, o.Status)
		require.WithinDuration(t, time.Now().Add(time.Minute), o.PayDeadline, 10*time.Second)
		require.Equal(t, []orders.Status{orders.StatusCreated}, redis.eventsFor(r.OrderID))
	}
	o, err := store.Order(ctx, bad.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusFailed, o.Status)
	require.False(t, o.ReleasePending, "released, so the outbox flag is cleared")
	require.Equal(t, map[int64]int{bad.OrderID: 1}, redis.released)
	require.Equal(t, map[int64]int{good1.OrderID: 1, good2.OrderID: 1}, redis.confirmed)
	require.Equal(t, []orders.Status{orders.StatusFailed}, redis.eventsFor(bad.OrderID))

	// Redelivered: nothing new in PostgreSQL, the Redis steps are redone
	// idempotently, the failure is not released twice.
	require.NoError(t, w.Handle(ctx, batch))
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), st.StockLeft)
	require.Equal(t, int64(2), st.Orders[orders.StatusCreated])
	require.Equal(t, map[int64]int{bad.OrderID: 1}, redis.released)
	require.Equal(t, 2, redis.confirmed[good1.OrderID])
	require.Equal(t, []int64{bad.OrderID}, failed, "the failure is told once, not again on redelivery")
}

// A hold PostgreSQL refuses for want of stock is a unit Redis had too many
// (it lost acknowledged writes): the worker ends it without putting the unit
// back on sale, while other failures give their stock back.
func TestWorkerKeepsUnitsPostgresRefusedOffSale(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 1, 1)
	redis := newRedisSide()
	w := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redis, Events: redis, PayTimeout: time.Minute, Log: testLog(t)})

	first, extra := pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 2, 1)
	unknown := pgstoretest.Reservation(v.ID+100, 3, 1)
	require.NoError(t, w.Handle(ctx, []seckill.Reservation{first, extra, unknown}))

	o, err := store.Order(ctx, extra.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusFailed, o.Status)
	require.Equal(t, map[int64]seckill.ReleaseMode{extra.OrderID: seckill.ReleaseRefused, unknown.OrderID: seckill.ReleaseAny}, redis.modes)
	require.Equal(t, map[int64]int{first.OrderID: 1}, redis.confirmed)
}

// Redis down after the transaction: the batch is returned as an error (the
// consumer retries it), and the retry finishes the job without doubling.
func TestWorkerRedisDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	v := pgstoretest.NewVoucher(t, store, 10, 1)
	redis := newRedisSide()
	w := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redis, Events: redis, Log: testLog(t)})

	ok1, over := pgstoretest.Reservation(v.ID, 1, 1), pgstoretest.Reservation(v.ID, 1, 1) // the second passes the limit
	batch := []seckill.Reservation{ok1, over}
	redis.setFail(errors.New("redis down"))
	require.Error(t, w.Handle(ctx, batch))
	o, err := store.Order(ctx, over.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusFailed, o.Status)
	require.True(t, o.ReleasePending, "the release is still owed")

	redis.setFail(nil)
	require.NoError(t, w.Handle(ctx, batch))
	o, err = store.Order(ctx, over.OrderID)
	require.NoError(t, err)
	require.False(t, o.ReleasePending)
	require.Equal(t, map[int64]int{over.OrderID: 1}, redis.released)
	require.Equal(t, map[int64]int{ok1.OrderID: 1}, redis.confirmed)
	require.Equal(t, []orders.Status{orders.StatusCreated}, redis.eventsFor(ok1.OrderID))
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(9), st.StockLeft)
}

// queue is a fresh topic of the package's broker as the order path sees it:
// the gateway's producer and the drain of the workers' group on it.
type queue struct {
	topic, group string
	producer     *kafkaq.Producer
	drain        *kafkaq.Drain
}

// newQueue makes a topic of partitions partitions, its producer, and the
// drain of the group "workers-" + topic (closed when the test ends).
func newQueue(t testing.TB, partitions int32) queue {
	t.Helper()
	q := queue{topic: stack.NewTopic(t, partitions)}
	q.group = "workers-" + q.topic
	var err error
	q.producer, err = kafkaq.NewProducer(stack.KafkaBrokers, q.topic, testLog(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.producer.Close() })
	q.drain, err = kafkaq.NewDrain(stack.KafkaBrokers, q.topic, q.group)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.drain.Close() })
	return q
}

// runConsumer runs a consumer of group on topic with handler until the
// returned stop is called.
func runConsumer(t testing.TB, topic, group string, h kafkaq.Handler, mutate ...func(*kafkaq.ConsumerConfig)) func() {
	t.Helper()
	cfg := kafkaq.ConsumerConfig{
		Brokers: stack.KafkaBrokers, Topic: topic, Group: group, Log: testLog(t),
		RetryBackoff: 20 * time.Millisecond, ShutdownGrace: 20 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	_, stop := kafkaqtest.Run(t, cfg, h)
	return stop
}

// committedTotal sums the group's committed offsets (0 before the group
// exists). It may run inside Eventually, so it never fails t.
func committedTotal(t testing.TB, group, topic string, partitions int32) int64 {
	t.Helper()
	var total int64
	for _, off := range kafkaqtest.Committed(t, stack.KafkaBrokers, group, topic, partitions) {
		total += max(0, off)
	}
	return total
}

// countOrders may run inside Eventually, so it never fails t.
func countOrders(t testing.TB, store *pgstore.Store) (orders, quantity int64) {
	t.Helper()
	err := store.Pool().QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(quantity), 0) FROM orders`).Scan(&orders, &quantity)
	if err != nil {
		t.Logf("count orders: %v", err)
		return -1, -1
	}
	return orders, quantity
}

// The whole worker path through Kafka: duplicates create one order, an
// unknown voucher fails only its own message, PostgreSQL alone keeps the
// stock exact when more arrives than there is (Redis bypassed).
func TestWorkerThroughKafka(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	const stock, buyers = 50, 80
	v := pgstoretest.NewVoucher(t, store, stock, 1)
	topic := stack.NewTopic(t, 6)
	p, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(t))
	require.NoError(t, err)
	defer p.Close()

	var rs []seckill.Reservation
	for u := range int64(buyers) {
		rs = append(rs, pgstoretest.Reservation(v.ID, u+1, 1))
	}
	bad := pgstoretest.Reservation(v.ID+100, 999, 1)
	rs = append(rs, bad)
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			// Every message twice, as a producer retry or a gateway replay
			// could write it.
			require.NoError(t, p.Publish(ctx, r))
			require.NoError(t, p.Publish(ctx, r))
		})
	}
	wg.Wait()

	redis := newRedisSide()
	w := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redis, Events: redis, Log: testLog(t)})
	stop := runConsumer(t, topic, "seckill-workers", w.Handle)
	require.Eventually(t, func() bool { return committedTotal(t, "seckill-workers", topic, 6) == int64(2*len(rs)) },
		60*time.Second, 50*time.Millisecond)
	stop()

	n, _ := countOrders(t, store)
	require.Equal(t, int64(len(rs)), n, "one order per reservation, duplicates ignored")
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Zero(t, st.StockLeft)
	require.Equal(t, int64(stock), st.Orders[orders.StatusCreated])
	require.Equal(t, int64(buyers-stock), st.Orders[orders.StatusFailed])
	o, err := store.Order(ctx, bad.OrderID)
	require.NoError(t, err)
	require.Equal(t, orders.StatusFailed, o.Status)

	redis.mu.Lock()
	defer redis.mu.Unlock()
	require.Len(t, redis.released, buyers-stock+1)
	require.Len(t, redis.confirmed, stock)
	for id, n := range redis.released {
		require.Equal(t, 1, n, "order %d released once", id)
	}
}

// A worker dies after its transaction committed and before the offsets were
// committed. The next worker of the group gets the same messages: nothing is
// lost, nothing doubled, and the Redis follow-ups are done.
func TestCrashBetweenTransactionAndOffsetCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(t))
	const n = 120
	v := pgstoretest.NewVoucher(t, store, 1000, 5)
	topic := stack.NewTopic(t, 3)
	group := "seckill-workers"
	p, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(t))
	require.NoError(t, err)
	defer p.Close()
	var ids []int64
	for i := range int64(n) {
		r := pgstoretest.Reservation(v.ID, i%40+1, 1)
		ids = append(ids, r.OrderID)
		require.NoError(t, p.Publish(ctx, r))
	}

	// Worker A persists, then "crashes" before it can say so: its handler
	// never returns nil, so no offset is committed. It hangs after its first
	// batch of each partition, so that batch must hold all of the partition's
	// messages (all published above): a long linger and a batch as large as
	// everything, or on a slow machine the 5 ms default closes the batch
	// early and the rest is never persisted.
	redisA := newRedisSide()
	wA := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redisA, Events: redisA, Log: testLog(t)})
	stopA := runConsumer(t, topic, group, func(ctx context.Context, batch []seckill.Reservation) error {
		if err := wA.Handle(ctx, batch); err != nil {
			return err
		}
		<-ctx.Done()
		return errors.New("crashed")
	}, func(c *kafkaq.ConsumerConfig) { c.MaxBatch, c.Linger = n, 2*time.Second })
	require.Eventually(t, func() bool {
		c, _ := countOrders(t, store)
		return c == n
	}, 60*time.Second, 20*time.Millisecond)
	// Every partition's first batch is persisted and hangs; let the claims
	// settle, then tear A down.
	stopA()
	require.Zero(t, committedTotal(t, group, topic, 3))

	redisB := newRedisSide()
	wB := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redisB, Events: redisB, Log: testLog(t)})
	stopB := runConsumer(t, topic, group, wB.Handle)
	require.Eventually(t, func() bool { return committedTotal(t, group, topic, 3) == n }, 60*time.Second, 50*time.Millisecond)
	stopB()

	c, q := countOrders(t, store)
	require.Equal(t, int64(n), c)
	require.Equal(t, int64(n), q)
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1000-n), st.StockLeft)
	require.Equal(t, int64(n), st.Orders[orders.StatusCreated])
	var buyers int64
	require.NoError(t, store.Pool().QueryRow(ctx, `SELECT sum(quantity) FROM voucher_buyers`).Scan(&buyers))
	require.Equal(t, int64(n), buyers)
	// B finished what A could not: every order confirmed in Redis.
	require.Equal(t, n, redisB.confirmedCount())
	for _, id := range ids {
		require.NotEmpty(t, redisB.eventsFor(id))
	}
}

// BenchmarkWorkerThroughKafka measures the workers' side of the path: b.N
// reservations already on the topic (6 partitions), one consumer with the
// Worker over PostgreSQL, until every offset is committed.
func BenchmarkWorkerThroughKafka(b *testing.B) {
	ctx := context.Background()
	store := pgstore.New(stack.NewDatabase(b))
	v := pgstoretest.NewVoucher(b, store, seckill.MaxStock, seckill.MaxPerUserLimit)
	topic := stack.NewTopic(b, 6)
	p, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(b))
	require.NoError(b, err)
	defer p.Close()
	work := make(chan seckill.Reservation)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for r := range work {
				if err := p.Publish(ctx, r); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range int64(b.N) {
		work <- pgstoretest.Reservation(v.ID, i%5000+1, 1)
	}
	close(work)
	wg.Wait()

	redis := newRedisSide()
	w := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: redis, Log: slog.New(slog.DiscardHandler)})
	b.ResetTimer()
	stop := runConsumer(b, topic, "seckill-workers", w.Handle)
	for committedTotal(b, "seckill-workers", topic, 6) < int64(b.N) {
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	stop()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
	n, _ := countOrders(b, store)
	require.Equal(b, int64(b.N), n)
}
