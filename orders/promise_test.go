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
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// The tests of "A 202 stands" (seckill/RULES.md) across gateways: each
// gateway is a Buyer over a redisstock.Store and a Kafka producer of its
// own, on the one Redis, PostgreSQL and topic, as two instances of the
// fleet are; their order ids come from one counter, as leased node ids keep
// them apart.

// countedStock is a gateway's stock that counts its reservation scripts, so
// a test can wait for a replay that asked again (it is waiting for the
// first order's fate).
type countedStock struct {
	*redisstock.Store
	reserves atomic.Int64
}

func (c *countedStock) Reserve(ctx context.Context, r seckill.Reservation) (seckill.ReserveResult, error) {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, r)
}

// otherGateway is a second gateway's stock and producer on topic.
func otherGateway(t *testing.T, topic string) (*countedStock, *kafkaq.Producer) {
	t.Helper()
	producer, err := kafkaq.NewProducer(stack.KafkaBrokers, topic, testLog(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = producer.Close() })
	return &countedStock{Store: redisstock.New(redisstock.Config{Redis: stack.Redis(t)})}, producer
}

// waitFor waits until ch is closed, or fails t.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("never happened: %s", what)
	}
}

// settledAndBalanced waits until no hold of v is pending (the workers
// persisted every message, every other hold was given back), then checks
// the stock rule of seckill/RULES.md in both stores: sold + held + left ==
// total in Redis, and Redis and PostgreSQL agree on what is left and sold.
func settledAndBalanced(t *testing.T, store *pgstore.Store, stock *redisstock.Store, v seckill.Voucher) orders.Stats {
	t.Helper()
	ctx := t.Context()
	require.Eventually(t, func() bool {
		s, err := stock.Snapshot(ctx, v.ID)
		return err == nil && s.Pending == 0
	}, time.Minute, 20*time.Millisecond, "every hold persisted or given back")
	snap, err := stock.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.True(t, snap.Balanced(), "%+v", snap)
	require.Equal(t, v.StockTotal, snap.Total)
	st, err := store.Stats(ctx, v.ID)
	require.NoError(t, err)
	sold := st.Quantity[orders.StatusCreated] + st.Quantity[orders.StatusPaid]
	require.Equal(t, st.StockTotal, st.StockLeft+sold, "PostgreSQL balances: %+v", st)
	require.Equal(t, st.StockLeft, snap.Left, "Redis and PostgreSQL agree on what is left")
	require.Equal(t, sold, snap.Held, "Redis holds what PostgreSQL sold")
	return st
}

// raceOfOneKey is one shopper's key sent to two gateways, A and B, on a
// voucher of 3: A's buy holds a unit and its Kafka write sits on the
// broker, unanswered, until release; then the retry is sent to B, whose
// replays wait as long as A takes (the tests are about what B answers), and
// raceOfOneKey returns once B has asked again (it found A's order
// undecided) or has answered.
type raceOfOneKey struct {
	store    *pgstore.Store
	stockA   *redisstock.Store
	v        seckill.Voucher
	topic    string
	gwA      *seckill.Buyer
	req      seckill.BuyRequest
	a, b     <-chan answer
	release  func()
	firstIDA int64 // the order id of A's buy
}

// answer is what one Buy returned.
type answer struct {
	res seckill.ReserveResult
	err error
}

// buyIn runs gw.Buy(ctx, req) in the background and hands its answer over.
func buyIn(ctx context.Context, gw *seckill.Buyer, req seckill.BuyRequest) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		res, err := gw.Buy(ctx, req)
		out <- answer{res, err}
	}()
	return out
}

func startRaceOfOneKey(t *testing.T, actx context.Context, req seckill.BuyRequest) raceOfOneKey {
	t.Helper()
	store, stockA, v, topic, producerA, ids := fenceSetup(t, 3)
	stockB, producerB := otherGateway(t, topic)
	gwA := seckill.NewBuyer(seckill.BuyerConfig{Stock: stockA, Queue: producerA, IDs: ids, Log: testLog(t), OrderFences: store})
	gwB := seckill.NewBuyer(seckill.BuyerConfig{Stock: stockB, Queue: producerB, IDs: ids, Log: testLog(t), OrderFences: store,
		ReplayWait: time.Minute})
	req.VoucherID = v.ID
	r := raceOfOneKey{store: store, stockA: stockA, v: v, topic: topic, gwA: gwA, req: req, firstIDA: v.ID*1000 + 1}
	reached, release := stack.HoldProduce(t, topic)
	r.release = release
	r.a = buyIn(actx, gwA, req)
	waitFor(t, reached, "A's write reaches the broker")
	bctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	r.b = buyIn(bctx, gwB, req)
	require.Eventually(t, func() bool { return stockB.reserves.Load() >= 2 || len(r.b) > 0 },
		30*time.Second, time.Millisecond, "B asks again, or answers")
	return r
}

// created waits until PostgreSQL has order id as created.
func created(t *testing.T, store *pgstore.Store, id int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		o, err := store.Order(t.Context(), id)
		return err == nil && o.Status == orders.StatusCreated
	}, 30*time.Second, 20*time.Millisecond, "order %d is created", id)
}

// TestReplayOnAnotherGatewayWaitsForTheFence: gateway A holds a unit and
// its Kafka write stays unanswered; the shopper's retry with the same
// Idempotency-Key reaches gateway B meanwhile. B must not answer 202 with
// A's order, which A is about to fence: it waits. A's write then fails
// unclearly, A fences the order as failed, gives the unit back and forgets
// the key, and B's waiting retry holds anew: its 202 names an order that
// stands. A third try, on A, replays B's order and creates nothing.
func TestReplayOnAnotherGatewayWaitsForTheFence(t *testing.T) {
	ctx := t.Context()
	actx, failA := context.WithCancel(ctx)
	defer failA()
	r := startRaceOfOneKey(t, actx, seckill.BuyRequest{UserID: 21, Quantity: 1, RequestKey: "across"})
	failA() // A's write ends without an answer: unclear

	a := <-r.a
	require.ErrorIs(t, a.err, apperr.ErrUnavailable)
	require.NotErrorIs(t, a.err, seckill.ErrOutcomeUnknown, "A fenced its order")
	status, _, _ := orderRow(t, r.store, r.firstIDA)
	require.Equal(t, string(orders.StatusFailed), status)
	// A's late message lands (the broker's hold would catch B's write
	// too, should B have held anew already).
	r.release()

	b := <-r.b
	require.NoError(t, b.err, "B waited for A's outcome")
	require.NotEqual(t, r.firstIDA, b.res.OrderID, "B's 202 never names the order A fenced")
	require.False(t, b.res.Replayed, "after the fence the key starts a new attempt")

	// The workers persist B's order and refuse A's late one.
	worker := orders.NewWorker(orders.WorkerConfig{Record: r.store, Stock: r.stockA, Events: newRedisSide(), Log: testLog(t)})
	stop := runConsumer(t, r.topic, "promise-workers", worker.Handle)
	defer stop()
	created(t, r.store, b.res.OrderID)

	third, err := r.gwA.Buy(ctx, r.req)
	require.NoError(t, err)
	require.True(t, third.Replayed, "a third try replays the promised order")
	require.Equal(t, b.res.OrderID, third.OrderID)

	st := settledAndBalanced(t, r.store, r.stockA, r.v)
	require.EqualValues(t, 1, st.Orders[orders.StatusCreated], "one order for one key")
	require.EqualValues(t, 1, st.Orders[orders.StatusFailed], "A's fenced order")
	status, _, _ = orderRow(t, r.store, r.firstIDA)
	require.Equal(t, string(orders.StatusFailed), status, "A's late message made nothing")
}

// TestReplayOnAnotherGatewayWaitsForTheWrite: the same race, but A's write
// is acknowledged in the end. B's retry waits until A promised the order,
// then replays it: one order, the one both answers name.
func TestReplayOnAnotherGatewayWaitsForTheWrite(t *testing.T) {
	r := startRaceOfOneKey(t, t.Context(), seckill.BuyRequest{UserID: 22, Quantity: 2, RequestKey: "acked"})
	worker := orders.NewWorker(orders.WorkerConfig{Record: r.store, Stock: r.stockA, Events: newRedisSide(), Log: testLog(t)})
	stop := runConsumer(t, r.topic, "promise-workers", worker.Handle)
	defer stop()
	r.release() // the broker acknowledges A's write

	a, b := <-r.a, <-r.b
	require.NoError(t, a.err)
	require.False(t, a.res.Replayed)
	require.NoError(t, b.err)
	require.True(t, b.res.Replayed)
	require.Equal(t, a.res.OrderID, b.res.OrderID, "one key, one order")
	created(t, r.store, a.res.OrderID)
	st := settledAndBalanced(t, r.store, r.stockA, r.v)
	require.EqualValues(t, 1, st.Orders[orders.StatusCreated])
	require.Zero(t, st.Orders[orders.StatusFailed])
}

// unclearQueue is a gateway's Kafka producer with the faults that make a
// write unclear: every third write is either lost on its way (never
// written) or written with its acknowledgement lost, and the gateway is told
// neither, only that no acknowledgement came.
type unclearQueue struct {
	q seckill.Queue
	n atomic.Int64
}

func (u *unclearQueue) Publish(ctx context.Context, r seckill.Reservation) error {
	switch n := u.n.Add(1); n % 6 {
	case 0: // lost on its way
		return fmt.Errorf("order %d: no acknowledgement: %w", r.OrderID, context.DeadlineExceeded)
	case 3: // written, its acknowledgement lost
		if err := u.q.Publish(ctx, r); err != nil {
			return err
		}
		return fmt.Errorf("order %d: the acknowledgement was lost: %w", r.OrderID, context.DeadlineExceeded)
	}
	return u.q.Publish(ctx, r)
}

// TestTwoGatewaysOneKeyUnderUnclearWrites: a crowd of shoppers, each
// sending their one Idempotency-Key to two gateways at once and retrying
// every 503 on either, while a third of the Kafka writes come back unclear
// (lost, or written with the acknowledgement lost) and are fenced. Whatever
// interleaving the crowd finds: every order a 202 named ends created, never
// failed; one key's 202s all name one order, and a shopper has at most one
// order; the stock balances in Redis and PostgreSQL.
func TestTwoGatewaysOneKeyUnderUnclearWrites(t *testing.T) {
	ctx := t.Context()
	const total, shoppers = 40, 60
	store, stockA, v, topic, producerA, ids := fenceSetup(t, total)
	stockB, producerB := otherGateway(t, topic)
	gateways := []*seckill.Buyer{
		seckill.NewBuyer(seckill.BuyerConfig{Stock: stockA, Queue: &unclearQueue{q: producerA}, IDs: ids, Log: testLog(t), OrderFences: store}),
		seckill.NewBuyer(seckill.BuyerConfig{Stock: stockB, Queue: &unclearQueue{q: producerB}, IDs: ids, Log: testLog(t), OrderFences: store}),
	}
	worker := orders.NewWorker(orders.WorkerConfig{Record: store, Stock: stockA, Events: newRedisSide(), Log: testLog(t)})
	stop := runConsumer(t, topic, "promise-workers", worker.Handle)
	defer stop()

	var mu sync.Mutex
	promised := map[int64]map[int64]bool{} // user -> the orders a 202 named
	var wg sync.WaitGroup
	shop := func(user int64, first int) {
		req := seckill.BuyRequest{VoucherID: v.ID, UserID: user, Quantity: 1, RequestKey: fmt.Sprintf("crowd-%d", user)}
		for attempt := range 30 {
			res, err := gateways[(first+attempt)%2].Buy(ctx, req)
			switch {
			case err == nil:
				mu.Lock()
				promised[user][res.OrderID] = true
				mu.Unlock()
				return
			case errors.Is(err, seckill.ErrSoldOut) || errors.Is(err, seckill.ErrLimitExceeded):
				return
			case !errors.Is(err, apperr.ErrUnavailable):
				t.Errorf("user %d: %v", user, err)
				return
			}
			time.Sleep(5 * time.Millisecond) // a shopper retries a 503
		}
	}
	for u := range int64(shoppers) {
		user := 1000 + u
		promised[user] = map[int64]bool{}
		for first := range 2 { // the same key to both gateways at once
			wg.Go(func() { shop(user, first) })
		}
	}
	wg.Wait()

	st := settledAndBalanced(t, store, stockA, v)
	n := 0
	for user, ids := range promised {
		require.LessOrEqual(t, len(ids), 1, "user %d: one key's 202s name one order: %v", user, ids)
		for id := range ids {
			n++
			o, err := store.Order(ctx, id)
			require.NoError(t, err, "order %d promised to user %d", id, user)
			require.Equal(t, orders.StatusCreated, o.Status, "order %d promised to user %d", id, user)
		}
	}
	require.EqualValues(t, n, st.Orders[orders.StatusCreated], "every created order was promised, once")
	require.LessOrEqual(t, st.Quantity[orders.StatusCreated], int64(total))
	require.NotZero(t, st.Orders[orders.StatusFailed], "some writes were fenced")
	t.Logf("%d shoppers promised, %d orders fenced", n, st.Orders[orders.StatusFailed])
}
