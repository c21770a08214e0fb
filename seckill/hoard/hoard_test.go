package hoard_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// ids hands out user and order ids unique within the test binary, so the
// tests share one Redis and run in parallel.
var ids atomic.Int64

func next() int64 { return ids.Add(1) }

// onEveryShape runs test, in parallel, on the package's plain redis-server
// and on its Redis Cluster of three masters.
func onEveryShape(t *testing.T, test func(t *testing.T, s *hoard.Store)) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			test(t, hoard.New(hoard.Config{Redis: stack.Client(t, shape), Limit: 3, Window: time.Hour}))
		})
	}
}

func TestLimitRefusesUntilTheOldestCountedStrikeLeaves(t *testing.T) {
	onEveryShape(t, func(t *testing.T, s *hoard.Store) {
		ctx := context.Background()
		user, other := next(), next()
		now := time.Now().Truncate(time.Millisecond)
		// Four strikes: one already out of the window, then three in it.
		at := []time.Time{now.Add(-2 * time.Hour), now.Add(-50 * time.Minute), now.Add(-20 * time.Minute), now.Add(-time.Minute)}
		for i, a := range at[:3] {
			require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: int64(100 + i), At: a}))
		}
		require.NoError(t, s.Check(ctx, user), "two strikes in the window are under the limit")

		// The same strike again counts once; another shopper's never.
		require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: 102, At: now}, hoard.Strike{UserID: other, OrderID: 200, At: now}))
		require.NoError(t, s.Check(ctx, user))

		require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: 103, At: at[3]}))
		err := s.Check(ctx, user)
		require.ErrorIs(t, err, seckill.ErrUnpaidLimit)
		until := at[1].Add(time.Hour).UTC().Format(time.RFC3339)
		require.Contains(t, err.Error(), "you may buy again at "+until)
		require.NoError(t, s.Check(ctx, other))

		c, err := s.Show(ctx, user)
		require.NoError(t, err)
		require.True(t, c.Refused)
		require.Equal(t, at[1].Add(time.Hour).UTC(), c.Until)
		require.Len(t, c.Strikes, 3, "the strike out of the window was trimmed")
		require.Equal(t, []int64{101, 102, 103}, []int64{c.Strikes[0].OrderID, c.Strikes[1].OrderID, c.Strikes[2].OrderID})

		n, err := s.Clear(ctx, user)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		require.NoError(t, s.Check(ctx, user))
		c, err = s.Show(ctx, user)
		require.NoError(t, err)
		require.False(t, c.Refused)
		require.Empty(t, c.Strikes)
	})
}

func TestStrikesExpireWithTheWindow(t *testing.T) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := hoard.New(hoard.Config{Redis: stack.Client(t, shape), Limit: 1, Window: 300 * time.Millisecond})
			user := next()
			require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: next(), At: time.Now()}))
			require.ErrorIs(t, s.Check(ctx, user), seckill.ErrUnpaidLimit)
			require.Eventually(t, func() bool { return s.Check(ctx, user) == nil }, 5*time.Second, 50*time.Millisecond)
		})
	}
}

func TestZeroLimitRefusesNobody(t *testing.T) {
	ctx := context.Background()
	s := hoard.New(hoard.Config{Redis: stack.Client(t, stack.RedisShapes(t)[0]), Limit: 0})
	user := next()
	for range 5 {
		require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: next(), At: time.Now()}))
	}
	require.NoError(t, s.Check(ctx, user))
	c, err := s.Show(ctx, user)
	require.NoError(t, err)
	require.Len(t, c.Strikes, 5)
	require.False(t, c.Refused)
}

// Through the buy path's group commit, Check judges like the plain client,
// and on a Redis gone silent it ends at its context's deadline instead of
// waiting on the batch (the autopipeliner ignores a queued caller's context).
func TestCheckThroughTheGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := stacktest.PrivateRedis(t)
	s := hoard.New(hoard.Config{Redis: rdb, Hot: redisstock.GroupCommit(rdb), Limit: 2, Window: time.Hour})

	user := next()
	require.NoError(t, s.Check(ctx, user))
	now := time.Now()
	require.NoError(t, s.Record(ctx, hoard.Strike{UserID: user, OrderID: next(), At: now},
		hoard.Strike{UserID: user, OrderID: next(), At: now}))
	require.ErrorIs(t, s.Check(ctx, user), seckill.ErrUnpaidLimit)
	require.NoError(t, s.Check(ctx, next()))

	require.NoError(t, srv.Freeze())
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Check(cctx, next()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("Check still waits on the frozen Redis long after its deadline")
	}
}
