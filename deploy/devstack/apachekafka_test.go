package devstack_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/kafkaq"
)

// The three-node cluster is shared by the tests that need one: a start
// costs seconds of both cores. Tests using it run one after another (no
// t.Parallel) and leave every node running and in sync.
var (
	threeOnce sync.Once
	three     *devstack.ApacheKafka
	threeErr  error
)

const threeTopic = "orders-3"

func threeNodes(t *testing.T) *devstack.ApacheKafka {
	t.Helper()
	threeOnce.Do(func() {
		three, threeErr = devstack.StartApacheKafka(context.Background(), devstack.ApacheKafkaOptions{
			Brokers: 3,
			Topics:  map[string]int32{threeTopic: 3},
		})
	})
	require.NoError(t, threeErr)
	return three
}

// produceOne sends one message with the order queue's producer settings and
// returns its partition and offset.
func produceOne(t *testing.T, brokers []string, topic, key, value string) (int32, int64) {
	t.Helper()
	p, err := sarama.NewSyncProducer(brokers, kafkaq.ProducerConfig())
	require.NoError(t, err)
	defer p.Close()
	part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value)})
	require.NoError(t, err)
	return part, off
}

// consumeGroup reads want messages of topic through a consumer group with
// the order queue's consumer settings, committing each, and returns their
// values.
func consumeGroup(t *testing.T, brokers []string, topic, group string, want int) []string {
	t.Helper()
	cfg := kafkaq.ConsumerGroupConfig()
	cg, err := sarama.NewConsumerGroup(brokers, group, cfg)
	require.NoError(t, err)
	defer cg.Close()
	got := make(chan received, want)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			_ = cg.Consume(ctx, []string{topic}, committer{recorder{member: group, got: got}})
		}
	}()
	var values []string
	for len(values) < want {
		select {
		case r := <-got:
			values = append(values, string(r.msg.Value))
		case <-ctx.Done():
			t.Fatalf("consumed %d of %d messages of %s: %v", len(values), want, topic, values)
		}
	}
	return values
}

// committer commits after each marked message, as the order workers do.
type committer struct{ recorder }

func (c committer) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		sess.MarkMessage(msg, "")
		sess.Commit()
		select {
		case c.got <- received{member: c.member, msg: msg}:
		case <-sess.Context().Done():
			return nil
		}
	}
	return nil
}

func TestApacheKafkaOneBrokerKeepsMessagesInDir(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(scratch(t), "kafka")
	k, err := devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{
		Topics: map[string]int32{"orders": 2},
		Dir:    dir,
		Log:    testLogger(t),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	require.Len(t, k.Brokers, 1)
	pid := k.Pid(0)
	require.True(t, devstack.Alive(pid))

	produceOne(t, k.Brokers, "orders", "a", "first")
	require.Equal(t, []string{"first"}, consumeGroup(t, k.Brokers, "orders", "g1", 1))
	leaders, err := k.Leaders(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, []int{0, 0}, leaders)
	ctl, err := k.Controller(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, ctl)

	// A second start on the same folder finds the topic, the message and
	// the group's committed offset.
	require.NoError(t, k.Close())
	require.False(t, devstack.Alive(pid), "kafka %d still runs after Close", pid)
	k2, err := devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{
		Topics: map[string]int32{"orders": 2},
		Dir:    dir,
		Log:    testLogger(t),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k2.Close() })
	produceOne(t, k2.Brokers, "orders", "b", "second")
	require.Equal(t, []string{"second"}, consumeGroup(t, k2.Brokers, "orders", "g1", 1), "the group re-read a committed message or lost one")
	require.NoError(t, k2.Close())

	// The folder holds a one-node cluster: three are refused with what to do.
	_, err = devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{Brokers: 3, Dir: dir})
	require.ErrorContains(t, err, "holds a 1-broker Kafka cluster")
	_, err = os.Stat(filepath.Join(dir, "node-0", "kafka.log"))
	require.NoError(t, err)
}

func TestApacheKafkaThreeNodesReplicateTopics(t *testing.T) {
	k := threeNodes(t)
	require.Len(t, k.Brokers, 3)

	// Both the topic made at start and one made later through the
	// platform's own path (the dead-letter topic) get RF 3 and
	// min.insync.replicas 2.
	require.NoError(t, kafkaq.EnsureTopic(k.Brokers, "dead-3", 1))
	admin, err := sarama.NewClusterAdmin(k.Brokers, kafkaq.ConsumerGroupConfig())
	require.NoError(t, err)
	defer admin.Close()
	for _, topic := range []string{threeTopic, "dead-3"} {
		var meta []*sarama.TopicMetadata
		require.Eventually(t, func() bool { // a new topic reaches every broker's metadata soon after
			meta, err = admin.DescribeTopics([]string{topic})
			return err == nil && len(meta) == 1 && len(meta[0].Partitions) > 0
		}, 30*time.Second, 100*time.Millisecond, "topic %s: %v", topic, err)
		for _, p := range meta[0].Partitions {
			require.Len(t, p.Replicas, 3, "topic %s partition %d", topic, p.ID)
		}
		var entries []sarama.ConfigEntry
		require.Eventually(t, func() bool {
			var res []*sarama.ConfigResourceResult
			res, err = admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"min.insync.replicas"}}}, sarama.DescribeConfigsOptions{})
			if err != nil || len(res) != 1 || res[0].ErrorCode != sarama.ErrNoError {
				return false
			}
			entries = res[0].Configs
			return true
		}, 30*time.Second, 100*time.Millisecond, "topic %s: %v", topic, err)
		require.Len(t, entries, 1)
		require.Equal(t, "2", entries[0].Value, "topic %s", topic)
	}
}

func TestApacheKafkaKillRestartKeepsData(t *testing.T) {
	ctx := t.Context()
	k := threeNodes(t)
	part, off := produceOne(t, k.Brokers, threeTopic, "k", "before-kill")

	victim, err := k.Leader(ctx, threeTopic, part)
	require.NoError(t, err)
	pid := k.Pid(victim)
	k.Kill(victim)
	require.False(t, devstack.Alive(pid))
	require.Zero(t, k.Pid(victim))

	// Two of three in sync still take writes with acks=all.
	require.Eventually(t, func() bool {
		l, err := k.Leader(ctx, threeTopic, part)
		return err == nil && l != victim
	}, 30*time.Second, 100*time.Millisecond, "no new leader after node %d was killed", victim)
	produceOne(t, k.Brokers, threeTopic, "k", "while-down")

	require.NoError(t, k.Start(ctx, victim))
	require.NotEqual(t, pid, k.Pid(victim))
	require.NoError(t, k.WaitInSync(ctx))

	// Graceful restart of the active controller: another takes over and the
	// node comes back.
	ctl, err := k.Controller(ctx)
	require.NoError(t, err)
	require.NoError(t, k.Restart(ctx, ctl))
	require.NoError(t, k.WaitInSync(ctx))

	// Every message is there, read from the restarted node's copy too.
	c, err := sarama.NewConsumer([]string{k.Brokers[victim]}, kafkaq.ConsumerGroupConfig())
	require.NoError(t, err)
	defer c.Close()
	pc, err := c.ConsumePartition(threeTopic, part, off)
	require.NoError(t, err)
	defer pc.Close()
	var got []string
	for len(got) < 2 {
		select {
		case m := <-pc.Messages():
			got = append(got, string(m.Value))
		case <-time.After(30 * time.Second):
			t.Fatalf("read %v from partition %d", got, part)
		}
	}
	require.Equal(t, []string{"before-kill", "while-down"}, got)
}

func TestApacheKafkaFreezeThaw(t *testing.T) {
	ctx := t.Context()
	k := threeNodes(t)
	ctl, err := k.Controller(ctx)
	require.NoError(t, err)
	require.NoError(t, k.Freeze(ctl))
	frozen := true
	t.Cleanup(func() {
		if frozen {
			k.Thaw(ctl)
		}
	})
	state := func() string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", k.Pid(ctl)))
		require.NoError(t, err)
		return string(b)
	}
	require.Contains(t, state(), ") T ", "node %d is not stopped", ctl)

	// The other two elect a new controller while it sleeps.
	require.Eventually(t, func() bool {
		c, err := k.Controller(ctx)
		return err == nil && c != ctl
	}, 60*time.Second, 200*time.Millisecond, "no other controller while node %d is frozen", ctl)

	k.Thaw(ctl)
	frozen = false
	require.NotContains(t, state(), ") T ")
	require.NoError(t, k.WaitInSync(ctx))
}

// closeThreeNodes ends the shared cluster once the package's tests ran.
func closeThreeNodes() {
	if three != nil {
		_ = three.Close()
	}
}

// A node started as production starts a broker runs with Kafka's own JVM
// settings (a fixed 1 GB heap, G1, the tiered compiler) and serves as the
// tests' nodes do.
func TestApacheKafkaProductionJVM(t *testing.T) {
	k, err := devstack.StartApacheKafka(t.Context(), devstack.ApacheKafkaOptions{
		Topics:        map[string]int32{"orders": 1},
		ProductionJVM: true,
		Log:           testLogger(t),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.Pid(0)))
	require.NoError(t, err)
	args := strings.Split(string(raw), "\x00")
	for _, want := range []string{"-Xmx1024m", "-Xms1024m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"} {
		require.Contains(t, args, want)
	}
	require.NotContains(t, args, "-XX:TieredStopAtLevel=1", "the full compiler")
	require.NotContains(t, args, "-XX:+UseSerialGC")
	produceOne(t, k.Brokers, "orders", "a", "first")
	require.Equal(t, []string{"first"}, consumeGroup(t, k.Brokers, "orders", "g1", 1))
}
