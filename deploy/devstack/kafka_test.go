package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
)

// saramaConfig is the configuration plan.md prescribes for the order queue.
func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "devstack-test"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Producer.Retry.Max = 5
	cfg.Producer.Return.Successes = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewHashPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond // quick rebalances in tests
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second           // kfake's minimum
	// A synchronous sess.Commit() per message would take up to
	// Consumer.MaxWaitTime (500ms) each: the commit queues behind the idle
	// long-poll fetch on the same broker connection, and Kafka (like kfake)
	// answers one request per connection at a time. Mark, and let sarama
	// commit on an interval and when the session ends.
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	return cfg
}

// recorder is a consumer group handler that hands every message to got and
// marks it.
type recorder struct {
	member string
	got    chan<- received
}

type received struct {
	member string
	msg    *sarama.ConsumerMessage
}

func (recorder) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (recorder) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (r recorder) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case r.got <- received{r.member, msg}:
			case <-sess.Context().Done():
				return nil
			}
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

// startMember joins group and consumes topic until the test ends or stop is called.
func startMember(t *testing.T, brokers []string, group, topic, member string, got chan<- received) (stop func()) {
	t.Helper()
	cg, err := sarama.NewConsumerGroup(brokers, group, saramaConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, recorder{member, got}); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				t.Logf("%s: consume: %v", member, err)
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			require.NoError(t, cg.Close())
		})
	}
	t.Cleanup(stop)
	return stop
}

func produce(t *testing.T, p sarama.SyncProducer, topic string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		_, _, err := p.SendMessage(&sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(strconv.Itoa(i % 37)), // a user id
			Value: sarama.StringEncoder(strconv.Itoa(i)),
		})
		require.NoError(t, err)
	}
}

// TestKafkaWithSarama proves that sarama, configured as plan.md says, works
// against kfake over TCP: an idempotent WaitForAll producer, a consumer group
// that starts at the oldest offset, a rebalance when a second member joins,
// and committed offsets that a later member resumes from.
func TestKafkaWithSarama(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const topic = "seckill.orders"
	k, err := devstack.StartKafka(ctx, devstack.KafkaOptions{Topics: map[string]int32{topic: 6}, Log: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(k.Close) // after the members' cleanups, which run first
	require.Len(t, k.Brokers, 1)

	producer, err := sarama.NewSyncProducer(k.Brokers, saramaConfig())
	require.NoError(t, err)
	defer producer.Close()
	produce(t, producer, topic, 0, 300)

	got := make(chan received, 1000)
	seen := map[string]bool{}
	last := map[int32]int64{} // partition -> last offset: order within a partition holds
	members := map[string]int{}
	take := func(n int) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for range n {
			select {
			case r := <-got:
				v := string(r.msg.Value)
				if prev, ok := last[r.msg.Partition]; ok && !seen[v] {
					require.Greater(t, r.msg.Offset, prev, "partition %d went backwards", r.msg.Partition)
				}
				last[r.msg.Partition] = r.msg.Offset
				seen[v] = true
				members[r.member]++
			case <-deadline:
				require.FailNow(t, fmt.Sprintf("timed out with %d messages seen", len(seen)))
			}
		}
	}
	stopA := startMember(t, k.Brokers, "seckill-workers", topic, "a", got)
	take(300)
	require.Len(t, seen, 300, "a new group starts at the oldest offset")

	// A second member joins: the group rebalances and both get partitions.
	stopB := startMember(t, k.Brokers, "seckill-workers", topic, "b", got)
	info, err := k.Cluster().WaitGroupStable(ctx, "seckill-workers", 2)
	require.NoError(t, err)
	require.NotNil(t, info)
	clear(members)
	produce(t, producer, topic, 300, 600)
	for len(seen) < 600 {
		take(1) // a rebalance may deliver an uncommitted message twice
	}
	require.Positive(t, members["a"], "member a got partitions after the rebalance")
	require.Positive(t, members["b"], "member b got partitions after the rebalance")

	// Everyone leaves; a new member resumes from the committed offsets.
	stopA()
	stopB()
	produce(t, producer, topic, 600, 610)
	startMember(t, k.Brokers, "seckill-workers", topic, "c", got)
	for len(seen) < 610 {
		take(1)
	}
	select {
	case r := <-got:
		require.FailNow(t, "a committed message came again", "value %s", r.msg.Value)
	case <-time.After(300 * time.Millisecond):
	}

	// Topics made at run time work too.
	require.NoError(t, k.CreateTopic(ctx, "later", 3))
	require.Error(t, k.CreateTopic(ctx, "later", 3), "an existing topic is an error")
	part, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: "later", Key: sarama.StringEncoder("7"), Value: sarama.StringEncoder("x")})
	require.NoError(t, err)
	require.Less(t, part, int32(3))
	require.NoError(t, k.DeleteTopic(ctx, "later"))
}

func TestKafkaCloseDropsClients(t *testing.T) {
	t.Parallel()
	k, err := devstack.StartKafka(t.Context(), devstack.KafkaOptions{Topics: map[string]int32{"t": 1}})
	require.NoError(t, err)
	cfg := saramaConfig()
	cfg.Producer.Retry.Max = 1
	cfg.Producer.Retry.Backoff = 10 * time.Millisecond
	cfg.Metadata.Retry.Max = 1
	cfg.Metadata.Retry.Backoff = 10 * time.Millisecond
	p, err := sarama.NewSyncProducer(k.Brokers, cfg)
	require.NoError(t, err)
	defer p.Close()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("x")})
	require.NoError(t, err)
	k.Close()
	k.Close() // twice is fine
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("y")})
	require.Error(t, err, "a closed broker takes nothing")
}

// TestKafkaDirKeepsMessagesAndOffsets is dev mode's restart: what was
// produced and what the group committed are there after Close and a new
// StartKafka on the same folder, on a new port.
func TestKafkaDirKeepsMessagesAndOffsets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	topics := map[string]int32{"seckill.orders": 3}
	k, err := devstack.StartKafka(ctx, devstack.KafkaOptions{Topics: topics, Dir: dir})
	require.NoError(t, err)
	p, err := sarama.NewSyncProducer(k.Brokers, saramaConfig())
	require.NoError(t, err)
	produce(t, p, "seckill.orders", 0, 20)
	require.NoError(t, p.Close())

	got := make(chan received, 100)
	stop := startMember(t, k.Brokers, "g", "seckill.orders", "a", got)
	for range 20 {
		<-got
	}
	stop() // commits what was marked
	before := committed(t, k.Brokers, "g", "seckill.orders")
	require.EqualValues(t, 20, sum(before))
	k.Close()

	k2, err := devstack.StartKafka(ctx, devstack.KafkaOptions{Topics: topics, Dir: dir})
	require.NoError(t, err)
	t.Cleanup(k2.Close)
	require.NotEqual(t, k.Brokers, k2.Brokers, "a new port")
	var total int64
	for _, pi := range k2.Cluster().PartitionInfos("seckill.orders") {
		total += pi.HighWatermark
	}
	require.EqualValues(t, 20, total, "the messages were reloaded")
	require.Equal(t, before, committed(t, k2.Brokers, "g", "seckill.orders"), "the group's offsets were reloaded")

	// The group resumes there: it sees only what is produced now.
	got2 := make(chan received, 100)
	startMember(t, k2.Brokers, "g", "seckill.orders", "b", got2)
	p2, err := sarama.NewSyncProducer(k2.Brokers, saramaConfig())
	require.NoError(t, err)
	defer p2.Close()
	produce(t, p2, "seckill.orders", 20, 21)
	select {
	case r := <-got2:
		require.Equal(t, "20", string(r.msg.Value))
	case <-time.After(15 * time.Second):
		require.FailNow(t, "the new message never came")
	}
	select {
	case r := <-got2:
		require.FailNow(t, "a committed message came again", "value %s", r.msg.Value)
	case <-time.After(300 * time.Millisecond):
	}
}

// committed returns the group's committed offset per partition.
func committed(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(brokers, saramaConfig())
	require.NoError(t, err)
	defer admin.Close()
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	require.NoError(t, err)
	out := map[int32]int64{}
	for part, b := range resp.Blocks[topic] {
		out[part] = b.Offset
	}
	return out
}

func sum(m map[int32]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

func TestKafkaRestartKeepsAddressAndData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	topics := map[string]int32{"seckill.orders": 2}
	k, err := devstack.StartKafka(ctx, devstack.KafkaOptions{Topics: topics, Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(k.Close)
	brokers := k.Brokers
	p, err := sarama.NewSyncProducer(brokers, saramaConfig())
	require.NoError(t, err)
	defer p.Close()
	produce(t, p, "seckill.orders", 0, 5)

	k.Stop()
	k.Stop() // twice is fine
	conn, err := net.DialTimeout("tcp", brokers[0], time.Second)
	if err == nil {
		conn.Close()
	}
	require.Error(t, err, "a stopped broker refuses connections")

	require.NoError(t, k.Start(ctx))
	require.Equal(t, brokers, k.Brokers, "the same address after a restart")
	var total int64
	for _, pi := range k.Cluster().PartitionInfos("seckill.orders") {
		total += pi.HighWatermark
	}
	require.EqualValues(t, 5, total, "the messages were reloaded")
	// The producer made before the restart reconnects by itself.
	produce(t, p, "seckill.orders", 5, 6)

	require.NoError(t, k.Restart(ctx))
	total = 0
	for _, pi := range k.Cluster().PartitionInfos("seckill.orders") {
		total += pi.HighWatermark
	}
	require.EqualValues(t, 6, total)
}
