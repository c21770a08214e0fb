package redisstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// A shopper's first try waits on a Redis gone silent and gives up; the
// retry, with the same Idempotency-Key, is sent while the first try's script
// is still on its way. When Redis answers again the first script holds a
// unit that nobody will queue a message for, and the store gives it back.
// The retry must not be answered as that hold's replay (a 202 for an order
// that never comes): it waits for the give-back and holds anew.
//
// Both faces of the store: through the group commit the retry's script
// leaves once the first's batch is answered, racing the give-back; on the
// plain client (a connection each) both scripts are in Redis's socket
// buffers before it runs again and run back to back, so without the wait
// the retry is always answered as the doomed hold's replay.
func TestRetryWaitsForAnAbandonedAttempt(t *testing.T) {
	t.Parallel()
	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "group-commit", true: "plain-client"}[plain]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			retryWaitsForAnAbandonedAttempt(t, plain)
		})
	}
}

func retryWaitsForAnAbandonedAttempt(t *testing.T, plain bool) {
	ctx := context.Background()
	srv, rdb := stacktest.PrivateRedis(t)
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb, NoGroupCommit: plain})}
	v := b.onSale(t, 10, 5)
	user := next()

	require.NoError(t, srv.Freeze())
	first := res(v, user, 1, "same-key")
	fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := b.store.Reserve(fctx, first)
	cancel()
	require.ErrorIs(t, err, apperr.ErrUnavailable, "the first try gives up on the silent Redis")

	type answer struct {
		res seckill.ReserveResult
		err error
	}
	retry := res(v, user, 1, "same-key")
	got := make(chan answer, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := b.store.Reserve(rctx, retry)
		got <- answer{r, err}
	}()
	// Let the retry reach the point where, without the wait, its script
	// would be queued right behind the first one's.
	time.Sleep(100 * time.Millisecond)
	srv.Thaw()

	var a answer
	select {
	case a = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the retry never answered after Redis came back")
	}
	require.NoError(t, a.err)
	assert.False(t, a.res.Replayed, "the retry is not the replay of a hold about to be given back")
	assert.Equal(t, retry.OrderID, a.res.OrderID)

	hold, found, err := b.store.Hold(ctx, a.res.OrderID, []int64{v.ID})
	require.NoError(t, err)
	require.True(t, found, "the order the retry was answered with is held")
	assert.Equal(t, user, hold.UserID)
	_, found, err = b.store.Hold(ctx, first.OrderID, []int64{v.ID})
	require.NoError(t, err)
	assert.False(t, found, "the abandoned hold was given back")
	snap := b.balanced(t, v)
	assert.Equal(t, int64(1), snap.Held)
	assert.Equal(t, int64(9), snap.Left)
}
