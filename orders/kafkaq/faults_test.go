package kafkaq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill"
)

// The tests of this file take nodes of the package's three-node cluster
// down, so they are not parallel; each brings every node back and waits for
// the replicas to be in sync before it ends.

// restoreAll starts every node again and waits until all replicas are in
// sync, when the test ends.
func restoreAll(t *testing.T, k *devstack.ApacheKafka) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for i := range k.Brokers {
			k.Thaw(i)
			require.NoError(t, k.Start(ctx, i))
		}
		require.NoError(t, k.WaitInSync(ctx))
	})
}

// faultSetup returns the cluster, a one-partition topic holding one
// published reservation, its producer and the partition's leader.
func faultSetup(t *testing.T) (*devstack.ApacheKafka, kafka, string, *kafkaq.Producer, int) {
	t.Helper()
	k := stack.ApacheKafka(t, 3)
	restoreAll(t, k)
	b := apache(t)
	topic := b.newTopic(t, 1)
	p := newProducer(t, b, topic)
	ctx := context.Background()
	require.NoError(t, p.Publish(ctx, reservation(1, 1)))
	leader, err := k.Leader(ctx, topic, 0)
	require.NoError(t, err)
	return k, b, topic, p, leader
}

// With two of three nodes down the partition cannot reach
// min.insync.replicas. A write already handed to sarama ends with
// NOT_ENOUGH_REPLICAS as soon as the refreshed metadata shows the partition
// below min.insync.replicas, not after the retry budget (about 27 s). That
// answer is refused before the append, but it is only the last of sarama's
// attempts: an earlier one may have been appended (the ISR check comes
// before the idempotent duplicate check), so it must not read as "not
// queued". The next write is refused before the hand-over, from the cached
// metadata: that one is certainly not queued. Once one node is back, writes
// succeed again without anyone touching the producer.
func TestPublishTwoNodesDown(t *testing.T) {
	k, _, _, p, leader := faultSetup(t)
	ctx := context.Background()
	var down []int
	for i := range k.Brokers {
		if i != leader {
			require.NoError(t, k.Stop(ctx, i))
			down = append(down, i)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	err := p.Publish(pctx, reservation(2, 1))
	t.Logf("publish with two nodes down: %v after %v", err, time.Since(began))
	require.ErrorIs(t, err, sarama.ErrNotEnoughReplicas)
	require.False(t, errors.Is(err, seckill.ErrNotQueued), "an earlier attempt may have been appended: %v", err)
	require.NoError(t, pctx.Err(), "the producer gave up before the caller's deadline")

	began = time.Now()
	err = p.Publish(pctx, reservation(3, 1))
	t.Logf("the next publish: %v after %v", err, time.Since(began))
	require.ErrorIs(t, err, sarama.ErrNotEnoughReplicas)
	require.ErrorIs(t, err, seckill.ErrNotQueued, "refused before the hand-over: nothing was sent")

	require.NoError(t, k.Start(ctx, down[0]))
	began = time.Now()
	require.Eventually(t, func() bool {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return p.Publish(actx, reservation(4, 1)) == nil
	}, 2*time.Minute, 200*time.Millisecond, "writes never resumed after node %d came back", down[0])
	t.Logf("writes resumed %v after node %d was started again", time.Since(began), down[0])
}

// A killed leader: sarama retries on the new leader and the write
// succeeds; the idempotent producer writes it once.
func TestPublishLeaderKilled(t *testing.T) {
	k, b, topic, p, leader := faultSetup(t)
	ctx := context.Background()
	k.Kill(leader)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	began := time.Now()
	err := p.Publish(pctx, reservation(2, 1))
	t.Logf("publish with the leader (node %d) killed: %v after %v", leader, err, time.Since(began))
	require.NoError(t, err)

	var c collector
	_, stop := run(t, b, kafkaq.ConsumerConfig{Topic: topic, Group: "g-" + topic}, c.handle)
	require.Eventually(t, func() bool { return c.count() >= 2 }, 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return committed(t, b, "g-"+topic, topic, 1)[0] == 2 }, 30*time.Second, 50*time.Millisecond)
	stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.seen, 2, "each message once")
}

// A frozen leader answers nothing: Publish ends with the caller's deadline
// ("no acknowledgement yet"), an unclear outcome, never "not queued" (the
// hold stays for the worker or the reconciler). The message is still in
// sarama's hands: thawed, the node (no longer the leader: the controller
// moved the partition while it was frozen) answers NOT_LEADER, and sarama
// sends the batch to the new leader with the same sequence number. The
// next message of the partition is acknowledged only after that retry is
// over, so once it is, the unclear one is in the partition once at most.
func TestPublishLeaderFrozen(t *testing.T) {
	k, b, topic, p, leader := faultSetup(t)
	ctx := context.Background()
	require.NoError(t, k.Freeze(leader))
	pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	began := time.Now()
	err := p.Publish(pctx, reservation(2, 1))
	t.Logf("publish with the leader (node %d) frozen: %v after %v", leader, err, time.Since(began))
	k.Thaw(leader)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, seckill.ErrNotQueued), "a frozen leader may have written it: %v", err)

	pctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, p.Publish(pctx, reservation(3, 1)), "the producer works on after the thaw")
	seen := readAll(t, b.brokers, topic, 1)
	require.Equal(t, 1, seen[1], "the earlier message once")
	require.Equal(t, 1, seen[3], "the later message once")
	require.LessOrEqual(t, seen[2], 1, "the unclear message at most once")
	t.Logf("the unclear message is in the partition %d time(s)", seen[2])
}
