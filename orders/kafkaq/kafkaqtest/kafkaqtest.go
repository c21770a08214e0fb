// Package kafkaqtest runs kafkaq consumers for the tests of kafkaq and of
// the workers built on it: it starts one for a test, stops it when the test
// ends, and reads the offsets its group committed. It is for tests only;
// nothing in production imports it.
package kafkaqtest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill/testlog"
)

// Run starts a consumer with cfg that hands its batches to h until the
// returned stop is called or the test ends, whichever comes first; stop
// waits for Run to return and requires that it ended cleanly. cfg.Brokers,
// Topic and Group must be set; a zero ShutdownGrace becomes 20 ms (tests need
// not wait for in-flight batches) and a nil Log writes into the test's log.
func Run(t testing.TB, cfg kafkaq.ConsumerConfig, h kafkaq.Handler) (*kafkaq.Consumer, func()) {
	t.Helper()
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 20 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = testlog.Logger(t, slog.LevelInfo)
	}
	c, err := kafkaq.NewConsumer(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, h) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
			require.NoError(t, c.Close())
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// Committed returns group's committed offset per partition of topic's first
// partitions (none before the group exists). It may run inside Eventually,
// so it never fails t: what goes wrong is logged and reads as no offsets.
func Committed(t testing.TB, brokers []string, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	admin, err := sarama.NewClusterAdmin(brokers, kafkaq.ConsumerGroupConfig())
	if err != nil {
		t.Logf("kafka admin: %v", err)
		return out
	}
	defer admin.Close()
	ps := make([]int32, partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	resp, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		if !errors.Is(err, sarama.ErrGroupIDNotFound) {
			t.Logf("list offsets: %v", err)
		}
		return out
	}
	for p, b := range resp.Blocks[topic] {
		out[p] = b.Offset
	}
	return out
}
