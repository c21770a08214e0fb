package kafkaq_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/orders/kafkaq/kafkaqtest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/testlog"
)

func testLog(t testing.TB) *slog.Logger {
	return testlog.Logger(t, slog.LevelInfo)
}

// kafka is one broker the tests run on: the in-process kfake, quick and
// fresh, and a three-node Apache Kafka cluster (replication factor 3,
// min.insync.replicas 2), the broker production runs.
type kafka struct {
	name    string
	brokers []string
	// newTopic creates a topic of the given partitions for this test only.
	newTopic func(t testing.TB, partitions int32) string
	// dropTopic deletes a topic the code under test created; nil where
	// topics die with the cluster at the end of the binary.
	dropTopic func(name string)
}

// kafkas returns both brokers, kfake first. Tests run a table over them,
// with subtests named by broker.
func kafkas(t testing.TB) []kafka {
	t.Helper()
	return []kafka{kfake(), apache(t)}
}

func kfake() kafka {
	return kafka{name: "kfake", brokers: stack.KafkaBrokers, newTopic: stack.NewTopic,
		dropTopic: func(name string) { _ = stack.Kafka.DeleteTopic(context.Background(), name) }}
}

// apache is the package's three-node cluster, started on first use.
func apache(t testing.TB) kafka {
	t.Helper()
	k := stack.ApacheKafka(t, 3)
	return kafka{name: "apache", brokers: k.Brokers, newTopic: func(t testing.TB, partitions int32) string {
		return stack.NewApacheTopic(t, k, partitions)
	}}
}

// onEachKafka runs test as a parallel subtest per broker.
func onEachKafka(t *testing.T, test func(t *testing.T, k kafka)) {
	t.Helper()
	for _, k := range kafkas(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			test(t, k)
		})
	}
}

func newProducer(t testing.TB, k kafka, topic string) *kafkaq.Producer {
	t.Helper()
	p, err := kafkaq.NewProducer(k.brokers, topic, testLog(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// collector is a handler that records every reservation it is given.
type collector struct {
	mu      sync.Mutex
	seen    []seckill.Reservation
	batches int
	largest int // the most reservations one call was given
}

func (c *collector) handle(_ context.Context, batch []seckill.Reservation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, batch...)
	c.batches++
	c.largest = max(c.largest, len(batch))
	return nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// run starts a consumer in the background; the returned stop tears it down
// and waits for Run to return.
func run(t testing.TB, k kafka, cfg kafkaq.ConsumerConfig, h kafkaq.Handler) (*kafkaq.Consumer, func()) {
	t.Helper()
	cfg.Brokers = k.brokers
	return kafkaqtest.Run(t, cfg, h)
}

// committed returns the group's committed offset per partition.
func committed(t testing.TB, k kafka, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	return kafkaqtest.Committed(t, k.brokers, group, topic, partitions)
}

func reservation(orderID, userID int64) seckill.Reservation {
	return seckill.Reservation{OrderID: orderID, VoucherID: 7, UserID: userID, Quantity: 1,
		ReservedAt: time.Now().UTC().Truncate(time.Millisecond)}
}

// Many goroutines publish at once; every message arrives once, and one
// user's messages of a voucher arrive in the order that user published them.
func TestPublishConsume(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 6)
		p := newProducer(t, k, topic)
		const users, perUser = 40, 25

		var wg sync.WaitGroup
		for u := range int64(users) {
			wg.Go(func() {
				for i := range int64(perUser) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := p.Publish(ctx, reservation((u+1)*1000+i, u+1))
					cancel()
					if err != nil {
						t.Errorf("publish: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()

		var c collector
		cons, _ := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: "g-" + topic, MaxBatch: 50}, c.handle)
		require.Eventually(t, func() bool { return c.count() >= users*perUser }, 30*time.Second, 10*time.Millisecond)
		time.Sleep(100 * time.Millisecond)

		c.mu.Lock()
		defer c.mu.Unlock()
		require.Len(t, c.seen, users*perUser)
		last := map[int64]int64{}
		for _, r := range c.seen {
			require.Greater(t, r.OrderID, last[r.UserID], "user %d out of order", r.UserID)
			last[r.UserID] = r.OrderID
			require.Equal(t, int64(7), r.VoucherID)
		}
		require.Less(t, c.batches, users*perUser/2, "messages are batched")
		// Every message was published before the consumer joined, so the
		// voucher's partition has 1,000 waiting: only MaxBatch keeps a batch
		// at 50.
		require.LessOrEqual(t, c.largest, 50, "no batch is larger than MaxBatch")
		require.Eventually(t, func() bool {
			lag := cons.Lag()
			var total int64
			for _, l := range lag {
				total += l
			}
			return len(lag) > 0 && total == 0
		}, 5*time.Second, 10*time.Millisecond)
		// The key is the voucher's: its messages, from 40 users, filled one
		// partition and left the other five empty.
		require.Eventually(t, func() bool {
			used, sum := 0, int64(0)
			for _, off := range committed(t, k, "g-"+topic, topic, 6) {
				if off > 0 { // -1: nothing committed there
					used++
					sum += off
				}
			}
			return used == 1 && sum == users*perUser
		}, 5*time.Second, 10*time.Millisecond, "one voucher's messages are in one partition")
	})
}

// A poison message is skipped and committed past; it never blocks the
// partition.
func TestPoisonSkipped(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 1)
		group := "g-" + topic
		p := newProducer(t, k, topic)
		ctx := context.Background()
		require.NoError(t, p.Publish(ctx, reservation(1, 1)))

		raw, err := sarama.NewSyncProducer(k.brokers, kafkaq.ProducerConfig())
		require.NoError(t, err)
		defer raw.Close()
		for _, v := range []string{`{not json`, `{"order_id":"0","voucher_id":"7","user_id":"1"}`} {
			_, _, err = raw.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(v)})
			require.NoError(t, err)
		}
		require.NoError(t, p.Publish(ctx, reservation(2, 1)))

		var c collector
		_, stop := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group}, c.handle)
		require.Eventually(t, func() bool { return c.count() == 2 }, 30*time.Second, 10*time.Millisecond)
		stop()
		require.Equal(t, map[int32]int64{0: 4}, committed(t, k, group, topic, 1))

		// Only poison left at the end of the partition: still committed past.
		_, _, err = raw.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(`[]`)})
		require.NoError(t, err)
		_, stop = run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group}, c.handle)
		require.Eventually(t, func() bool { return committed(t, k, group, topic, 1)[0] == 5 }, 30*time.Second, 50*time.Millisecond)
		stop()
		require.Equal(t, 2, c.count())
	})
}

// A failing handler gets the same batch again until it succeeds; nothing is
// committed before, nothing is skipped.
func TestHandlerErrorRetried(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 1)
		group := "g-" + topic
		p := newProducer(t, k, topic)
		for i := range int64(5) {
			require.NoError(t, p.Publish(context.Background(), reservation(i+1, 1)))
		}

		var calls atomic.Int32
		var mu sync.Mutex
		var got [][]seckill.Reservation
		handler := func(_ context.Context, batch []seckill.Reservation) error {
			mu.Lock()
			got = append(got, append([]seckill.Reservation(nil), batch...))
			mu.Unlock()
			if calls.Add(1) <= 3 {
				return errors.New("database down")
			}
			return nil
		}
		_, stop := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group, RetryBackoff: 20 * time.Millisecond, Linger: 100 * time.Millisecond}, handler)
		require.Eventually(t, func() bool { return committed(t, k, group, topic, 1)[0] == 5 }, 30*time.Second, 20*time.Millisecond)
		stop()

		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(got), 4)
		for _, b := range got[1:4] {
			require.Equal(t, got[0], b, "the same batch is retried")
		}
		var ids []int64
		for _, b := range got[3:] {
			for _, r := range b {
				ids = append(ids, r.OrderID)
			}
		}
		require.Equal(t, []int64{1, 2, 3, 4, 5}, ids)
	})
}

// A consumer torn down while its handler has not returned commits nothing:
// the next member of the group gets the messages again.
func TestNoCommitWithoutSuccess(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 2)
		group := "g-" + topic
		p := newProducer(t, k, topic)
		for i := range int64(10) {
			require.NoError(t, p.Publish(context.Background(), reservation(i+1, i%3+1)))
		}

		var seenA atomic.Int32
		_, stop := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group}, func(ctx context.Context, batch []seckill.Reservation) error {
			seenA.Add(int32(len(batch)))
			<-ctx.Done() // "crash": never returns success
			return ctx.Err()
		})
		require.Eventually(t, func() bool { return seenA.Load() > 0 }, 30*time.Second, 10*time.Millisecond)
		stop()
		for part, off := range committed(t, k, group, topic, 2) {
			require.LessOrEqual(t, off, int64(0), "partition %d committed without success", part)
		}

		var c collector
		_, stop = run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group}, c.handle)
		require.Eventually(t, func() bool { return c.count() == 10 }, 30*time.Second, 10*time.Millisecond)
		stop()
	})
}

func TestPublishRespectsContext(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 1)
		p, err := kafkaq.NewProducer(k.brokers, topic, testLog(t))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, p.Publish(ctx, reservation(1, 1)), context.Canceled)
		require.NoError(t, p.Close())
		require.ErrorIs(t, p.Publish(context.Background(), reservation(2, 1)), kafkaq.ErrClosed)
	})
}

func TestDecode(t *testing.T) {
	t.Parallel()
	r := reservation(42, 9)
	r.RequestKey = "k"
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.Contains(t, string(b), `"order_id":"42"`)
	got, err := kafkaq.Decode(b)
	require.NoError(t, err)
	require.Equal(t, r, got)
	for _, bad := range []string{``, `null`, `{}`, `{"order_id":42}`, `{"order_id":"1","voucher_id":"1","user_id":"-1"}`} {
		_, err := kafkaq.Decode([]byte(bad))
		require.Error(t, err, bad)
	}
}

func BenchmarkPublish(b *testing.B) {
	k := kfake()
	topic := k.newTopic(b, 6)
	p := newProducer(b, k, topic)
	var n atomic.Int64
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if err := p.Publish(context.Background(), reservation(i, i%1000+1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// A batch being handled when the consumer stops finishes and is committed
// (within ShutdownGrace), so a clean shutdown redelivers nothing.
func TestShutdownFinishesBatch(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 1)
		group := "g-" + topic
		p := newProducer(t, k, topic)
		for i := range int64(3) {
			require.NoError(t, p.Publish(context.Background(), reservation(i+1, 1)))
		}
		started := make(chan struct{})
		var once sync.Once
		_, stop := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group, Linger: 50 * time.Millisecond, ShutdownGrace: 5 * time.Second},
			func(ctx context.Context, batch []seckill.Reservation) error {
				once.Do(func() { close(started) })
				select {
				case <-time.After(300 * time.Millisecond): // a slow transaction
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		<-started
		stop()
		require.Equal(t, map[int32]int64{0: 3}, committed(t, k, group, topic, 1))
	})
}

// Poison goes to the dead-letter topic and never blocks its partition: a
// message that is not a reservation at once, and one the handler keeps
// failing on (not for an outage) after DeadLetterAfter attempts of its batch,
// while the rest of that batch is handled. An outage is waited out, never
// dead-lettered. Operators list the letters and replay one, and the replayed
// message reaches the handler again.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	onEachKafka(t, func(t *testing.T, k kafka) {
		topic := k.newTopic(t, 1)
		dlqTopic := topic + kafkaq.DeadLetterSuffix
		if k.dropTopic != nil {
			t.Cleanup(func() { k.dropTopic(dlqTopic) })
		}
		group := "g-" + topic
		ctx := context.Background()
		p := newProducer(t, k, topic)
		raw, err := sarama.NewSyncProducer(k.brokers, kafkaq.ProducerConfig())
		require.NoError(t, err)
		defer raw.Close()

		require.NoError(t, p.Publish(ctx, reservation(1, 1)))
		_, _, err = raw.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(`{not json`)})
		require.NoError(t, err)
		for i := int64(2); i <= 4; i++ {
			require.NoError(t, p.Publish(ctx, reservation(i, 1)))
		}

		// Order 3 fails for a reason of its own; order 4 first meets an outage.
		var mu sync.Mutex
		handled := map[int64]int{}
		poisoned := atomic.Bool{}
		poisoned.Store(true)
		outages := 8
		handler := func(_ context.Context, batch []seckill.Reservation) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range batch {
				if r.OrderID == 3 && poisoned.Load() {
					return errors.New("row refused: a bug, not an outage")
				}
				if r.OrderID == 4 && outages > 0 {
					outages--
					return apperr.ErrUnavailable
				}
			}
			for _, r := range batch {
				handled[r.OrderID]++
			}
			return nil
		}
		dl, err := kafkaq.NewDeadLetters(k.brokers, dlqTopic)
		require.NoError(t, err)
		t.Cleanup(func() { _ = dl.Close() })
		reg := prometheus.NewRegistry()
		metrics, err := kafkaq.NewMetrics(reg)
		require.NoError(t, err)
		_, stop := run(t, k, kafkaq.ConsumerConfig{
			Topic: topic, Group: group, DeadLetters: dl, DeadLetterAfter: 3, Metrics: metrics,
			RetryBackoff: 5 * time.Millisecond, MaxRetryBackoff: 20 * time.Millisecond, Linger: 50 * time.Millisecond,
		}, handler)
		require.Eventually(t, func() bool { return committed(t, k, group, topic, 1)[0] == 5 }, 30*time.Second, 50*time.Millisecond,
			"the partition moves past both poison messages")
		stop()
		mu.Lock()
		require.Equal(t, map[int64]int{1: 1, 2: 1, 4: 1}, handled, "every good message handled once, the outage waited out")
		require.Zero(t, outages)
		mu.Unlock()

		letters, err := kafkaq.ListDeadLetters(ctx, k.brokers, dlqTopic)
		require.NoError(t, err)
		require.Len(t, letters, 2)
		require.Equal(t, `{not json`, letters[0].Value)
		require.Contains(t, letters[0].Reason, kafkaq.ReasonUndecodable)
		require.Equal(t, topic+"/0/1", letters[0].Source)
		require.Contains(t, letters[1].Reason, kafkaq.ReasonFailed)
		require.Contains(t, letters[1].Reason, "a bug, not an outage")
		require.Equal(t, topic+"/0/3", letters[1].Source)
		require.WithinDuration(t, time.Now(), letters[1].At, time.Minute)
		r3, err := kafkaq.Decode([]byte(letters[1].Value))
		require.NoError(t, err)
		require.Equal(t, int64(3), r3.OrderID)
		fams, err := reg.Gather()
		require.NoError(t, err)
		dead := map[string]float64{}
		for _, f := range fams {
			if f.GetName() == "seckill_consumer_dead_letters_total" {
				for _, m := range f.GetMetric() {
					dead[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
		require.Equal(t, map[string]float64{kafkaq.ReasonUndecodable: 1, kafkaq.ReasonFailed: 1}, dead)

		// The bug is fixed: the operator replays order 3, and it is handled.
		poisoned.Store(false)
		got, err := kafkaq.ReplayDeadLetter(ctx, k.brokers, dlqTopic, topic, letters[1].Partition, letters[1].Offset)
		require.NoError(t, err)
		require.Equal(t, letters[1], got)
		_, err = kafkaq.ReplayDeadLetter(ctx, k.brokers, dlqTopic, topic, 0, 99)
		require.Error(t, err, "no letter there")
		_, stop = run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group, DeadLetters: dl}, handler)
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled[3] == 1
		}, 30*time.Second, 20*time.Millisecond)
		stop()
	})
}
