package hoard_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
)

// countingHook counts the commands sent through a client.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// A Watch judges a shopper without strikes from memory, and every other
// one as Store.Check does: strikes written before it started (read), by
// another process while it runs (its message), and by its own Store
// (at once, so a refusal right after a cancel on this gateway holds).
// Many shoppers struck concurrently by another process are all refused in
// the end, and none without strikes ever is.
func TestWatchJudgesFromMemoryOnlyTheUnstruck(t *testing.T) {
	onEveryShapeClient(t, func(t *testing.T, rdb redis.UniversalClient, hot redis.UniversalClient, reads *countingHook) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := hoard.Config{Redis: rdb, Hot: hot, Limit: 2, Window: time.Hour}
		gateway, sweeper := hoard.New(cfg), hoard.New(hoard.Config{Redis: rdb, Limit: 2, Window: time.Hour})
		now := time.Now()
		before := next()
		require.NoError(t, sweeper.Record(ctx, hoard.Strike{UserID: before, OrderID: next(), At: now},
			hoard.Strike{UserID: before, OrderID: next(), At: now}))

		w := gateway.Watch(hoard.WatchConfig{})
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		<-w.Ready()

		require.ErrorIs(t, w.Check(ctx, before), seckill.ErrUnpaidLimit, "struck before the watch started")
		readsBefore := reads.n.Load()
		for range 50 {
			require.NoError(t, w.Check(ctx, next()))
		}
		assert.Equal(t, readsBefore, reads.n.Load(), "a shopper without strikes costs no read")

		own := next()
		require.NoError(t, gateway.Record(ctx, hoard.Strike{UserID: own, OrderID: next(), At: now},
			hoard.Strike{UserID: own, OrderID: next(), At: now}))
		require.ErrorIs(t, w.Check(ctx, own), seckill.ErrUnpaidLimit, "this process's own strike, at once")

		struck := make([]int64, 40)
		var wg sync.WaitGroup
		for i := range struck {
			struck[i] = next()
			wg.Go(func() {
				for range 2 {
					assert.NoError(t, sweeper.Record(ctx, hoard.Strike{UserID: struck[i], OrderID: next(), At: time.Now()}))
				}
			})
			wg.Go(func() {
				assert.NoError(t, w.Check(ctx, next()), "never a shopper without strikes")
			})
		}
		wg.Wait()
		for _, u := range struck {
			require.Eventually(t, func() bool {
				return w.Check(ctx, u) != nil
			}, 5*time.Second, 5*time.Millisecond, "another process's strikes reach the watch")
			require.ErrorIs(t, w.Check(ctx, u), seckill.ErrUnpaidLimit)
		}

		// A pardon needs no message: a struck shopper is read from Redis.
		_, err := sweeper.Clear(ctx, before)
		require.NoError(t, err)
		require.NoError(t, w.Check(ctx, before))

		cancel()
		require.NoError(t, <-done)
	})
}

// onEveryShapeClient runs test on both shapes with a client and a second
// client, the buy path's, whose commands are counted.
func onEveryShapeClient(t *testing.T, test func(t *testing.T, rdb, hot redis.UniversalClient, reads *countingHook)) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			hot, reads := stack.Client(t, shape), &countingHook{}
			hot.AddHook(reads)
			test(t, stack.Client(t, shape), hot, reads)
		})
	}
}
