// Package kafkaqtest starts a kafkaq consumer for a test and stops it when
// the test ends, for the tests of kafkaq and of the workers built on it. It is
// for tests only; nothing in production imports it.
package kafkaqtest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/testlog"
	"github.com/flashsale/seckill/orders/kafkaq"
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
