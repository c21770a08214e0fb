package notify_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

func order(id, userID int64, st orders.Status) orders.Order {
	created := time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC)
	o := orders.Order{
		ID:          id,
		VoucherID:   9007199254740993, // 2^53+1: exactly what a browser would mangle as a number
		UserID:      userID,
		Quantity:    2,
		AmountCents: 1998,
		Status:      st,
		CreatedAt:   created,
	}
	if st != orders.StatusReserved {
		o.PayDeadline = created.Add(15 * time.Minute)
	}
	return o
}

func TestOrderJSONShape(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	o := order(1234567890123456789, 42, orders.StatusCreated)
	o.CreatedAt = o.CreatedAt.In(shanghai) // any zone in, UTC out
	b, err := json.Marshal(notify.OrderJSON(o))
	require.NoError(t, err)
	require.JSONEq(t, `{
		"order_id": "1234567890123456789",
		"voucher_id": "9007199254740993",
		"user_id": "42",
		"quantity": 2,
		"amount_cents": 1998,
		"status": "created",
		"created_at": "2026-03-01T12:00:00.123456Z",
		"pay_deadline": "2026-03-01T12:15:00.123456Z",
		"payment": null
	}`, string(b))

	paid := o
	paid.Status = orders.StatusPaid
	paid.Payment = &orders.Payment{ID: "pi_1", OrderID: o.ID, Provider: "stripe", Status: "succeeded", AmountCents: 1998,
		Currency: "CNY", ClientSecret: "never shown with an order"}
	b, err = json.Marshal(notify.OrderJSON(paid))
	require.NoError(t, err)
	require.Contains(t, string(b), `"payment":{"payment_id":"pi_1","provider":"stripe","status":"succeeded","amount_cents":1998,"currency":"CNY"}`)
	require.NotContains(t, string(b), "never shown", "the client secret is the payment's answer only")

	b, err = json.Marshal(notify.OrderJSON(order(1, 42, orders.StatusReserved)))
	require.NoError(t, err)
	require.Contains(t, string(b), `"pay_deadline":null`, "no deadline before the order is persisted")

	frame, err := notify.OrderFrame(o)
	require.NoError(t, err)
	var f struct {
		Type  string          `json:"type"`
		Order json.RawMessage `json:"order"`
	}
	require.NoError(t, json.Unmarshal(frame, &f))
	require.Equal(t, "order", f.Type)
	want, err := json.Marshal(notify.OrderJSON(o))
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(f.Order), "the frame carries exactly the REST object")
}

func TestParseClientMessage(t *testing.T) {
	typ, err := notify.ParseClientMessage([]byte(`{"type":"ping"}`))
	require.NoError(t, err)
	require.Equal(t, api.FramePing, typ)
	for _, bad := range []string{``, `ping`, `{"type":"pong"}`, `{"type":1}`, `[]`, `{"type":"ping"` + string(make([]byte, 600)) + `}`} {
		_, err := notify.ParseClientMessage([]byte(bad))
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%q", bad)
	}
	var pong map[string]string
	require.NoError(t, json.Unmarshal([]byte(api.PongFrame), &pong))
	require.Equal(t, map[string]string{"type": "pong"}, pong)
}

// startHub runs a hub on its own Redis connection until t ends.
func startHub(t *testing.T, cfg notify.HubConfig) (*notify.Hub, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Redis, cfg.Registerer = newRedis(t), reg
	h, err := notify.NewHub(cfg)
	require.NoError(t, err)
	t.Cleanup(runHub(t, h))
	return h, reg
}

// runHub runs h until the returned stop is called, which waits for Run to
// return nil. It returns once h is Ready.
func runHub(t testing.TB, h *notify.Hub) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	select {
	case <-h.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("the hub did not start: %v", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// stopUnrun stops a hub that was never run, as Run does when it ends: with
// its context already ended, Run subscribes to nothing.
func stopUnrun(h *notify.Hub) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.Run(ctx)
}

func publish(t *testing.T, p *notify.Publisher, o orders.Order) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Publish(ctx, orders.Event{Order: o, At: time.Now()}))
}

// next reads one frame within a generous bound.
func next(t *testing.T, s *notify.Subscription) api.Frame {
	t.Helper()
	select {
	case b, ok := <-s.C():
		require.True(t, ok, "subscription ended: %v", s.Err())
		var f api.Frame
		require.NoError(t, json.Unmarshal(b, &f))
		return f
	case <-time.After(5 * time.Second):
		t.Fatal("no frame within 5s")
		return api.Frame{}
	}
}

func requireNothing(t *testing.T, s *notify.Subscription) {
	t.Helper()
	select {
	case b := <-s.C():
		t.Fatalf("unexpected frame %s", b)
	default:
	}
}

func TestEventCrossesInstances(t *testing.T) {
	hubA, _ := startHub(t, notify.HubConfig{})
	hubB, regB := startHub(t, notify.HubConfig{})
	pubA := notify.NewPublisher(newRedis(t)) // instance A's publisher

	buyerOnB := hubB.Subscribe(101)
	defer buyerOnB.Close()
	buyerOnA := hubA.Subscribe(101) // the same buyer's second tab, on A
	defer buyerOnA.Close()
	otherOnB := hubB.Subscribe(102)
	defer otherOnB.Close()

	publish(t, pubA, order(5001, 101, orders.StatusCreated))
	publish(t, pubA, order(5001, 101, orders.StatusPaid))

	for _, s := range []*notify.Subscription{buyerOnB, buyerOnA} {
		f := next(t, s)
		require.Equal(t, api.FrameOrder, f.Type)
		require.Equal(t, notify.OrderJSON(order(5001, 101, orders.StatusCreated)), *f.Order)
		f = next(t, s)
		require.EqualValues(t, orders.StatusPaid, f.Order.Status, "in publish order")
	}
	// Both events were handled by B before the second reached buyerOnB, and
	// the hub handles events one at a time: anything for 102 would be there.
	requireNothing(t, otherOnB)

	require.Equal(t, 2.0, value(t, regB, "seckill_notify_pushes_total", ""))
	require.Equal(t, 2.0, value(t, regB, "seckill_notify_subscriptions", ""))
	require.Equal(t, uint64(2), histogramCount(t, regB, "seckill_notify_push_delay_seconds"))
}

func TestSlowSubscriberIsDroppedOthersUnaffected(t *testing.T) {
	const buffer = 4
	hub, reg := startHub(t, notify.HubConfig{BufferSize: buffer})
	pub := notify.NewPublisher(newRedis(t))

	blocked := hub.Subscribe(201) // never reads
	healthy := hub.Subscribe(201) // same user, another tab
	defer healthy.Close()
	neighbour := hub.Subscribe(202)
	defer neighbour.Close()

	// The healthy tab reads each frame as it comes, like a socket writer;
	// the test paces on it, so only the blocked one can fall behind.
	const n = 20
	for i := range n {
		publish(t, pub, order(int64(6000+i), 201, orders.StatusCreated))
		if i%5 == 0 {
			publish(t, pub, order(int64(7000+i), 202, orders.StatusCreated))
		}
		require.Equal(t, strconv.Itoa(6000+i), next(t, healthy).Order.OrderID, "healthy reader gets every event, in order")
	}
	for range 4 {
		require.Equal(t, "202", next(t, neighbour).Order.UserID)
	}

	select {
	case <-blocked.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("blocked subscriber was not dropped")
	}
	require.ErrorIs(t, blocked.Err(), notify.ErrSlowConsumer)
	buffered := 0
	for range blocked.C() { // what was buffered, then closed
		buffered++
	}
	require.Equal(t, buffer, buffered)

	require.Equal(t, 1.0, value(t, reg, "seckill_notify_drops_total", "slow"))
	require.Equal(t, 2.0, value(t, reg, "seckill_notify_subscriptions", ""))
	require.Equal(t, float64(n+buffer+4), value(t, reg, "seckill_notify_pushes_total", ""))
}

func TestCapsBoundTheHub(t *testing.T) {
	hub, err := notify.NewHub(notify.HubConfig{Redis: newRedis(t), MaxPerUser: 2, MaxSubscriptions: 3})
	require.NoError(t, err)

	first := hub.Subscribe(301)
	second := hub.Subscribe(301)
	third := hub.Subscribe(301) // over MaxPerUser: the oldest makes room
	<-first.Done()
	require.ErrorIs(t, first.Err(), notify.ErrReplaced)
	require.NoError(t, second.Err())
	require.NoError(t, third.Err())

	other := hub.Subscribe(302)
	require.NoError(t, other.Err())
	full := hub.Subscribe(303) // over MaxSubscriptions
	<-full.Done()
	require.ErrorIs(t, full.Err(), notify.ErrHubFull)
	require.ErrorIs(t, full.Err(), apperr.ErrUnavailable, "the gateway answers 503")
	_, open := <-full.C()
	require.False(t, open)

	other.Close()
	other.Close() // twice is fine
	require.NoError(t, other.Err(), "own Close is not an error")
	again := hub.Subscribe(303)
	require.NoError(t, again.Err(), "Close freed a place")

	stopUnrun(hub)
	<-second.Done()
	require.ErrorIs(t, second.Err(), notify.ErrStopped)
	late := hub.Subscribe(304)
	<-late.Done()
	require.ErrorIs(t, late.Err(), notify.ErrStopped)
}

func TestBadEventsAreIgnored(t *testing.T) {
	hub, reg := startHub(t, notify.HubConfig{})
	rdb := newRedis(t)
	sub := hub.Subscribe(401)
	defer sub.Close()

	ctx := context.Background()
	for _, bad := range []string{`nope`, `{"order":{"user_id":"x"}}`, `{"order":{"user_id":401}}`, `{}`} {
		require.NoError(t, rdb.SPublish(ctx, notify.ChannelOf(401), bad).Err())
	}
	publish(t, notify.NewPublisher(rdb), order(8001, 401, orders.StatusCancelled))
	require.EqualValues(t, orders.StatusCancelled, next(t, sub).Order.Status)
	require.Equal(t, 4.0, value(t, reg, "seckill_notify_events_total", "bad"))
}

// wire is the JSON object of one event as a publisher of either kind puts
// it on a shard channel, written here from the outside.
func wire(t *testing.T, o orders.Order) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Order api.Order `json:"order"`
		At    time.Time `json:"at"`
	}{notify.OrderJSON(o), time.Now().UTC()})
	require.NoError(t, err)
	return string(b)
}

// TestSingleAndArrayMessagesMix: a hub reads single-event messages (an
// older publisher, or Publish) and array messages (PublishBatch) on one
// channel, in the order they were published.
func TestSingleAndArrayMessagesMix(t *testing.T) {
	hub, reg := startHub(t, notify.HubConfig{})
	rdb := newRedis(t)
	pub := notify.NewPublisher(rdb)
	sub := hub.Subscribe(801)
	defer sub.Close()
	ctx := t.Context()
	ch := notify.ChannelOf(801)
	o := func(id int64) orders.Order { return order(id, 801, orders.StatusCreated) }

	for _, msg := range []string{
		wire(t, o(1)),
		"[" + wire(t, o(2)) + "," + wire(t, o(3)) + "]",
		" \n[" + wire(t, o(4)) + "]",
		wire(t, o(5)),
	} {
		require.NoError(t, rdb.SPublish(ctx, ch, msg).Err())
	}
	publish(t, pub, o(6))
	require.NoError(t, pub.PublishBatch(ctx, []orders.Event{{Order: o(7), At: time.Now()}, {Order: o(8), At: time.Now()}}))
	require.NoError(t, pub.PublishBatch(ctx, []orders.Event{{Order: o(9), At: time.Now()}}))
	for id := 1; id <= 9; id++ {
		f := next(t, sub)
		require.Equal(t, strconv.Itoa(id), f.Order.OrderID)
		require.Equal(t, notify.OrderJSON(o(int64(id))), *f.Order)
	}
	requireNothing(t, sub)
	require.Equal(t, 0.0, value(t, reg, "seckill_notify_events_total", "bad"))
	require.Equal(t, 9.0, value(t, reg, "seckill_notify_events_total", "delivered"))
}

// TestBadArrayElementsAreSkipped: an array's malformed elements are counted
// bad and the others delivered; an array that is not JSON is one bad event.
func TestBadArrayElementsAreSkipped(t *testing.T) {
	hub, reg := startHub(t, notify.HubConfig{})
	rdb := newRedis(t)
	sub := hub.Subscribe(402)
	defer sub.Close()
	ctx := t.Context()
	ch := notify.ChannelOf(402)
	good := func(id int64) string { return wire(t, order(id, 402, orders.StatusCreated)) }

	// Elements of the wrong JSON type, and events without a buyer.
	bad := []string{`{"order":{"user_id":"x"}}`, `42`, `null`, `{"order":5}`, `"s"`, `[]`, `{}`, `{"order":{"user_id":402}}`}
	msg := "[" + good(8101) + "," + strings.Join(bad, ",") + "," + good(8102) + "]"
	require.NoError(t, rdb.SPublish(ctx, ch, msg).Err())
	// Only events without a buyer: each is found bad after the array was
	// read at once.
	unbought := []string{`{}`, `null`, `{"order":{"user_id":"0"}}`}
	msg = "[" + strings.Join(unbought, ",") + "," + good(8103) + "]"
	require.NoError(t, rdb.SPublish(ctx, ch, msg).Err())
	for _, broken := range []string{"[" + good(8104) + ",{", "[", "[]"} {
		require.NoError(t, rdb.SPublish(ctx, ch, broken).Err())
	}
	require.NoError(t, rdb.SPublish(ctx, ch, "["+good(8105)+"]").Err())

	require.Equal(t, "8101", next(t, sub).Order.OrderID)
	require.Equal(t, "8102", next(t, sub).Order.OrderID, "after the bad elements")
	require.Equal(t, "8103", next(t, sub).Order.OrderID, "after the events without a buyer")
	require.Equal(t, "8105", next(t, sub).Order.OrderID, "nothing of a broken array, and the hub still reads")
	requireNothing(t, sub)
	require.Equal(t, float64(len(bad)+len(unbought)+2), value(t, reg, "seckill_notify_events_total", "bad"),
		"each bad element, each broken array")
	require.Equal(t, 4.0, value(t, reg, "seckill_notify_events_total", "delivered"))
}

// TestHubSubscribesAgainAfterLosingRedis kills every pub/sub connection, on
// each shape: the hub subscribes to every channel again by itself, and its
// subscribers are told to resync.
func TestHubSubscribesAgainAfterLosingRedis(t *testing.T) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			hub, err := notify.NewHub(notify.HubConfig{Redis: stack.Client(t, shape), Registerer: reg})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			defer runHub(t, hub)()
			rdb := stack.Client(t, shape)
			pub := notify.NewPublisher(rdb)
			sub := hub.Subscribe(501)
			defer sub.Close()

			killed := eachMaster(t, rdb, func(c *redis.Client) int64 {
				n, err := c.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
				require.NoError(t, err)
				return n
			})
			require.EqualValues(t, notify.ChannelCount, killed, "one connection per shard channel")

			select {
			case <-sub.Resync():
			case <-time.After(5 * time.Second):
				t.Fatal("no resync signal after the connection was killed")
			}
			ch := notify.ChannelOf(501)
			require.Eventually(t, func() bool {
				n, err := rdb.PubSubShardNumSub(ctx, ch).Result()
				return err == nil && n[ch] == 1
			}, 5*time.Second, 10*time.Millisecond)
			publish(t, pub, order(9001, 501, orders.StatusPaid))
			require.Equal(t, "9001", next(t, sub).Order.OrderID)
			require.GreaterOrEqual(t, value(t, reg, "seckill_notify_reconnects_total", ""), 1.0)
		})
	}
}

// eachMaster runs f on every master of rdb (the one server of a plain
// client) and sums what it returns.
func eachMaster(t *testing.T, rdb redis.UniversalClient, f func(*redis.Client) int64) int64 {
	t.Helper()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return f(rdb.(*redis.Client))
	}
	var sum atomic.Int64
	require.NoError(t, cc.ForEachMaster(t.Context(), func(_ context.Context, c *redis.Client) error {
		sum.Add(f(c))
		return nil
	}))
	return sum.Load()
}

// TestHubRunsOnce: a hub runs once, from Ready until its context ends, and
// then refuses subscriptions.
func TestHubRunsOnce(t *testing.T) {
	hub, err := notify.NewHub(notify.HubConfig{Redis: newRedis(t)})
	require.NoError(t, err)
	early := hub.Subscribe(601) // before Run: kept, served once Ready
	stop := runHub(t, hub)
	require.ErrorIs(t, hub.Run(t.Context()), apperr.ErrConflict, "one Run per hub")
	sub := hub.Subscribe(601)
	publish(t, notify.NewPublisher(newRedis(t)), order(6601, 601, orders.StatusCreated))
	require.Equal(t, "6601", next(t, sub).Order.OrderID)
	require.Equal(t, "6601", next(t, early).Order.OrderID)
	stop()
	<-sub.Done()
	require.ErrorIs(t, sub.Err(), notify.ErrStopped)
	late := hub.Subscribe(602)
	<-late.Done()
	require.ErrorIs(t, late.Err(), notify.ErrStopped)
}

func TestRunFailsWithoutRedis(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	hub, err := notify.NewHub(notify.HubConfig{Redis: dead, SubscribeTimeout: time.Second})
	require.NoError(t, err)
	sub := hub.Subscribe(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.ErrorIs(t, hub.Run(ctx), apperr.ErrUnavailable)
	<-sub.Done()
	require.ErrorIs(t, sub.Err(), notify.ErrStopped, "a hub whose Run failed is stopped")

	require.ErrorIs(t, notify.NewPublisher(dead).Publish(ctx, orders.Event{Order: order(1, 1, orders.StatusPaid)}), apperr.ErrUnavailable)
}

func TestSameRegistryTwiceIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := notify.NewHub(notify.HubConfig{Redis: newRedis(t), Registerer: reg})
	require.NoError(t, err)
	_, err = notify.NewHub(notify.HubConfig{Redis: newRedis(t), Registerer: reg})
	require.Error(t, err)
}

func TestNoGoroutineLeak(t *testing.T) {
	rdbA, rdbB := newRedis(t), newRedis(t)
	pub := notify.NewPublisher(rdbA)
	ctx := context.Background()
	require.NoError(t, rdbA.Ping(ctx).Err())
	require.NoError(t, rdbB.Ping(ctx).Err())
	runtime.GC()
	before := runtime.NumGoroutine()

	for range 3 {
		a, err := notify.NewHub(notify.HubConfig{Redis: rdbA, BufferSize: 2})
		require.NoError(t, err)
		b, err := notify.NewHub(notify.HubConfig{Redis: rdbB, BufferSize: 2})
		require.NoError(t, err)
		stopA, stopB := runHub(t, a), runHub(t, b)
		subs := []*notify.Subscription{a.Subscribe(701), b.Subscribe(701), b.Subscribe(702)}
		reader := b.Subscribe(701)
		for i := range 4 {
			publish(t, pub, order(int64(10_000+i), 701, orders.StatusCreated))
			next(t, reader)
		}
		subs[0].Close()
		stopA()
		stopB()
		for _, s := range subs[1:] {
			<-s.Done()
		}
	}

	// Polled here, not with require.Eventually: that runs the condition on
	// a goroutine of its own, which would count.
	for end := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if runtime.NumGoroutine() > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
}

// value reads one counter or gauge sample from reg; label, when set, is the
// value of the metric's only label.
func value(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{%s}", name, label)
	return 0
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
