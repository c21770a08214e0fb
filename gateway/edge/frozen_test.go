package edge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// A Redis that stops answering without closing anything (SIGSTOP: its
// sockets stay open, as over a link gone silent): every buy ends with 503
// unavailable within its steps' own bounds (the limits', the unpaid strikes'
// read, the reservation's call timeout), well before a far-off request
// deadline; the limit's and the reservation's failures open the breaker,
// which then refuses without asking Redis; and once Redis answers again a
// reservation it ran after its buyer gave up is given back.
func TestFrozenRedisBuysEndBoundedAndOpenTheBreaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, rdb := stacktest.PrivateRedis(t)
	const stock = 100
	v := warm(t, rdb, stock)
	store := redisstock.New(redisstock.Config{Redis: rdb})

	const threshold = 3
	e, _ := newEdge(t, rdb, edge.Config{BreakerFailures: threshold, BreakerOpenFor: time.Hour,
		CallTimeout: time.Second, ModePoll: time.Hour, FleetBeat: time.Hour})
	steps := e.Steps()
	steps.Hoard = hoard.New(hoard.Config{Redis: rdb, Hot: redisstock.GroupCommit(rdb), Limit: 3, Window: time.Hour})
	buy := chain(steps, v, buyWith(realBuyer(t, store)))
	user := int64(1)
	try := func(deadline time.Duration) error {
		user++
		bctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := buy(bctx, attempt(v.ID, user))
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, bctx.Err(), "the buy waited out its request's deadline: a step's Redis call is unbounded")
			return err
		case <-time.After(deadline + 5*time.Second):
			t.Fatalf("a buy with a %v deadline still waits on the frozen Redis %v after it", deadline, 5*time.Second)
			return nil
		}
	}
	require.NoError(t, try(5*time.Second))

	require.NoError(t, srv.Freeze())
	var failures int
	for e.Breaker.Paths()[edge.PathRedis] != "open" {
		err := try(30 * time.Second)
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		failures++
		require.Less(t, failures, threshold, "the breaker did not open")
	}
	// Open: refused at once, with a Retry-After, without a Redis call.
	err := try(2 * time.Second)
	require.ErrorIs(t, err, apperr.ErrUnavailable)
	require.GreaterOrEqual(t, retryAfter(err), time.Second)

	// Redis answers again: whatever it ran for the buys that gave up, the
	// stock is whole but for the one sold.
	srv.Thaw()
	require.Eventually(t, func() bool {
		left, err := store.StockLeft(ctx, v.ID)
		return err == nil && left[v.ID] == stock-1
	}, 10*time.Second, 50*time.Millisecond, "a hold made after its buyer gave up was not given back")
}
