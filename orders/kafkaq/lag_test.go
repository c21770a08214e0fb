package kafkaq_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
)

// The drain reads the workers' lag from the brokers: every message of the
// topic until the group has committed past it. It grows while no worker
// consumes (none ever joined, or they stopped) and falls to zero once they
// have persisted and committed. On Apache Kafka: the offsets are the
// broker's own.
func TestDrainLagIsWhatTheGroupHasNotCommitted(t *testing.T) {
	ctx := context.Background()
	k := apache(t)
	topic := k.newTopic(t, 3)
	group := "workers-" + topic
	d, err := kafkaq.NewDrain(k.brokers, topic, group)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	lag := func() int64 {
		n, err := d.Lag(ctx)
		require.NoError(t, err)
		return n
	}
	require.Zero(t, lag(), "nothing produced")

	p := newProducer(t, k, topic)
	for i := range int64(7) {
		require.NoError(t, p.Publish(ctx, reservation(100+i, 1+i)))
	}
	require.EqualValues(t, 7, lag(), "no worker ever joined: everything is behind")

	var c collector
	_, stop := run(t, k, kafkaq.ConsumerConfig{Topic: topic, Group: group, Log: testLog(t)}, c.handle)
	require.Eventually(t, func() bool { return lag() == 0 }, 30*time.Second, 100*time.Millisecond,
		"the workers persist and commit everything")
	stop()

	for i := range int64(4) {
		require.NoError(t, p.Publish(ctx, reservation(200+i, 1+i)))
	}
	require.EqualValues(t, 4, lag(), "the workers gone: the lag grows again")
	require.Equal(t, 7, c.count())
}
