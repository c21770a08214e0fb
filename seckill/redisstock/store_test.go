package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// ids hands out voucher, user and order ids unique within the test binary, so
// tests share one Redis and run in parallel without touching each other.
var ids atomic.Int64

func next() int64 { return ids.Add(1) }

type bundle struct {
	rdb   redis.UniversalClient
	store *redisstock.Store
}

// onEveryShape runs test, in parallel, on the package's plain redis-server
// and on its Redis Cluster of three masters.
func onEveryShape(t *testing.T, test func(t *testing.T, b bundle)) {
	for _, shape := range stack.RedisShapes(t) {
		t.Run(shape.Name, func(t *testing.T) {
			t.Parallel()
			rdb := stack.Client(t, shape)
			test(t, bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb})})
		})
	}
}

func setup(t testing.TB) bundle {
	t.Helper()
	opts, err := redis.ParseURL(stack.RedisURL)
	require.NoError(t, err)
	opts.PoolSize = 64 // BenchmarkReserve runs 50 goroutines
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb})}
}

// serverNow is Redis's clock, which reserve.lua checks the window with.
func serverNow(t testing.TB, rdb redis.Cmdable) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now
}

// voucher is an on-sale seckill voucher with the given stock and limit.
func voucher(stock, limit int64, begin, end time.Time) seckill.Voucher {
	return seckill.Voucher{
		ID: next(), Title: "test", Kind: seckill.KindSeckill, PriceCents: 990,
		StockTotal: stock, StockLeft: stock, PerUserLimit: limit, BeginAt: begin, EndAt: end,
	}
}

// onSale warms a voucher whose window is open for the next hour.
func (b bundle) onSale(t testing.TB, stock, limit int64) seckill.Voucher {
	t.Helper()
	now := serverNow(t, b.rdb)
	v := voucher(stock, limit, now.Add(-time.Minute), now.Add(time.Hour))
	require.NoError(t, b.store.Warm(context.Background(), v))
	return v
}

func res(v seckill.Voucher, user, qty int64, key string) seckill.Reservation {
	return seckill.Reservation{OrderID: next(), VoucherID: v.ID, UserID: user, Quantity: qty, RequestKey: key, ReservedAt: time.Now()}
}

// reserve runs Reserve, which must not fail, and returns its result.
func (b bundle) reserve(t testing.TB, r seckill.Reservation) seckill.ReserveResult {
	t.Helper()
	got, err := b.store.Reserve(context.Background(), r)
	require.NoError(t, err)
	return got
}

// promise is what a gateway does once a keyed hold's message is written:
// from then on a replay of its key may be answered with it.
func (b bundle) promise(t testing.TB, r seckill.Reservation) {
	t.Helper()
	require.NoError(t, b.store.Promise(context.Background(), r))
}

func (b bundle) balanced(t testing.TB, v seckill.Voucher) redisstock.Snapshot {
	t.Helper()
	snap, err := b.store.Snapshot(context.Background(), v.ID)
	require.NoError(t, err)
	require.True(t, snap.Balanced(), "unbalanced: %+v", snap)
	require.Equal(t, v.StockTotal, snap.Total)
	return snap
}

func TestReserveReturnCodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	now := serverNow(t, b.rdb)

	t.Run("held", func(t *testing.T) {
		v := b.onSale(t, 10, 3)
		r := res(v, next(), 2, "")
		got, err := b.store.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, seckill.ReserveResult{OrderID: r.OrderID, StockLeft: 8}, got)
	})
	t.Run("undecided, then replay", func(t *testing.T) {
		v := b.onSale(t, 10, 3)
		first := res(v, next(), 1, "k")
		b.reserve(t, first)
		again := first
		again.OrderID = next()
		got, err := b.store.Reserve(ctx, again)
		require.ErrorIs(t, err, seckill.ErrUndecided, "not promised yet: no replay")
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		require.False(t, got.Replayed)
		require.EqualValues(t, 1, b.balanced(t, v).Holds, "nothing new held")
		b.promise(t, first)
		got, err = b.store.Reserve(ctx, again)
		require.NoError(t, err)
		require.Equal(t, seckill.ReserveResult{OrderID: first.OrderID, Replayed: true, StockLeft: 9}, got)
	})
	t.Run("not on sale", func(t *testing.T) {
		v := voucher(10, 1, now.Add(-time.Minute), now.Add(time.Hour)) // never warmed
		_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
		require.ErrorIs(t, err, seckill.ErrStockMissing)
		require.ErrorIs(t, err, apperr.ErrUnavailable, "a caller that knows nothing of it answers 503, never 404")
	})
	t.Run("not started", func(t *testing.T) {
		v := voucher(10, 1, now.Add(time.Hour), now.Add(2*time.Hour))
		require.NoError(t, b.store.Warm(ctx, v))
		_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
		require.ErrorIs(t, err, seckill.ErrNotStarted)
	})
	t.Run("ended", func(t *testing.T) {
		v := voucher(10, 1, now.Add(-time.Hour), now.Add(-time.Millisecond))
		require.NoError(t, b.store.Warm(ctx, v))
		_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
		require.ErrorIs(t, err, seckill.ErrEnded)
	})
	t.Run("sold out", func(t *testing.T) {
		v := b.onSale(t, 3, 10)
		b.reserve(t, res(v, next(), 2, ""))
		got, err := b.store.Reserve(ctx, res(v, next(), 2, ""))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		require.Equal(t, int64(1), got.StockLeft, "a refusal still says what is left")
		_, err = b.store.Reserve(ctx, res(v, next(), 1, ""))
		require.NoError(t, err, "stock >= quantity, not >")
		_, err = b.store.Reserve(ctx, res(v, next(), 1, ""))
		require.ErrorIs(t, err, seckill.ErrSoldOut)
		snap := b.balanced(t, v)
		require.Zero(t, snap.Left)
	})
	t.Run("limit exceeded", func(t *testing.T) {
		v := b.onSale(t, 10, 1)
		user := next()
		b.reserve(t, res(v, user, 1, ""))
		_, err := b.store.Reserve(ctx, res(v, user, 1, ""))
		require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	})
	t.Run("order id taken by another reservation", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		r := res(v, next(), 1, "")
		b.reserve(t, r)
		other := r
		other.UserID = next()
		_, err := b.store.Reserve(ctx, other)
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		other = r
		other.Quantity = 2
		_, err = b.store.Reserve(ctx, other)
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		// A keyed call with a taken id is refused too, and writes nothing:
		// not the other's hold, nor its own request key.
		keyed := res(v, next(), 1, "k1")
		b.reserve(t, keyed)
		other = res(v, next(), 1, "k2")
		other.OrderID = keyed.OrderID
		_, err = b.store.Reserve(ctx, other)
		require.ErrorIs(t, err, apperr.ErrUnavailable)
		snap := b.balanced(t, v)
		require.EqualValues(t, 2, snap.Holds, "the refused call held nothing")
		got, err := b.store.Reserve(ctx, res(v, other.UserID, 1, "k2"))
		require.NoError(t, err, "its key was not recorded: a new attempt with it holds")
		require.False(t, got.Replayed)
		b.balanced(t, v)
	})
	t.Run("invalid input", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		for _, r := range []seckill.Reservation{
			{OrderID: next(), VoucherID: v.ID, UserID: next(), Quantity: 0},
			{OrderID: next(), VoucherID: v.ID, UserID: next(), Quantity: seckill.MaxQuantity + 1},
			{OrderID: 0, VoucherID: v.ID, UserID: next(), Quantity: 1},
			{OrderID: next(), VoucherID: v.ID, UserID: 0, Quantity: 1},
			{OrderID: next(), VoucherID: v.ID, UserID: next(), Quantity: 1, RequestKey: string(make([]byte, seckill.MaxRequestKey+1))},
		} {
			_, err := b.store.Reserve(ctx, r)
			require.ErrorIs(t, err, apperr.ErrInvalidInput, "%+v", r)
		}
	})
}

func TestReserveWindowUsesServerTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	now := serverNow(t, b.rdb)
	begin := now.Add(400 * time.Millisecond)
	v := voucher(10, 10, begin, begin.Add(400*time.Millisecond))
	require.NoError(t, b.store.Warm(ctx, v))

	_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrNotStarted)

	for !serverNow(t, b.rdb).After(begin) {
		time.Sleep(10 * time.Millisecond)
	}
	b.reserve(t, res(v, next(), 1, ""))

	for serverNow(t, b.rdb).Before(v.EndAt) {
		time.Sleep(10 * time.Millisecond)
	}
	_, err = b.store.Reserve(ctx, res(v, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrEnded)

	// The edges: begin is inclusive, end exclusive (a window that ends at
	// the server's current millisecond is already over).
	now = serverNow(t, b.rdb).Truncate(time.Millisecond)
	open := voucher(10, 10, now, now.Add(time.Hour))
	closed := voucher(10, 10, now.Add(-time.Hour), now)
	require.NoError(t, b.store.Warm(ctx, open))
	require.NoError(t, b.store.Warm(ctx, closed))
	b.reserve(t, res(open, next(), 1, ""))
	_, err = b.store.Reserve(ctx, res(closed, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrEnded)
}

func TestReplayedRequestKeyHoldsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 100, 10)
	user := next()
	r := res(v, user, 3, "pay-123")
	first, err := b.store.Reserve(ctx, r)
	require.NoError(t, err)
	require.False(t, first.Replayed)
	b.promise(t, r)
	for range 5 {
		got, err := b.store.Reserve(ctx, res(v, user, 3, "pay-123"))
		require.NoError(t, err)
		require.True(t, got.Replayed)
		require.Equal(t, first.OrderID, got.OrderID)
	}
	// The key is per user: another user's same key is a new attempt.
	other, err := b.store.Reserve(ctx, res(v, next(), 1, "pay-123"))
	require.NoError(t, err)
	require.False(t, other.Replayed)
	// Keys may hold the separator.
	odd, err := b.store.Reserve(ctx, res(v, user, 1, "a:b:c"))
	require.NoError(t, err)
	h, ok, err := b.store.Hold(ctx, odd.OrderID, []int64{v.ID})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a:b:c", h.RequestKey)

	snap := b.balanced(t, v)
	require.Equal(t, int64(5), snap.Held)
	require.Equal(t, int64(3), snap.Holds)
	require.Equal(t, int64(95), snap.Left)
}

func TestRetriedReserveOfSameOrderHoldsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 100, 10)
	for _, key := range []string{"", "retry-key"} {
		r := res(v, next(), 2, key)
		first, err := b.store.Reserve(ctx, r)
		require.NoError(t, err)
		// go-redis may resend the script after a lost reply: the retry must
		// answer like the first call (so the caller goes on to queue it).
		again, err := b.store.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, first.OrderID, again.OrderID)
		require.False(t, again.Replayed)

		ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		// A retry after the release can never hold again (tombstone).
		late, err := b.store.Reserve(ctx, r)
		require.NoError(t, err)
		require.True(t, late.Replayed)
		require.Equal(t, r.OrderID, late.OrderID)
	}
	snap := b.balanced(t, v)
	require.Zero(t, snap.Held)
	require.Equal(t, int64(100), snap.Left)
}

func TestPerUserLimitCountsQuantities(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 100, 5)
	user := next()
	big, err := b.store.Reserve(ctx, res(v, user, 3, ""))
	require.NoError(t, err)
	_, err = b.store.Reserve(ctx, res(v, user, 3, ""))
	require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	b.reserve(t, res(v, user, 2, ""))
	_, err = b.store.Reserve(ctx, res(v, user, 1, ""))
	require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	// Another user has their own limit.
	b.reserve(t, res(v, next(), 5, ""))
	// A release gives the user's count back too.
	ok, err := b.store.Release(ctx, v.ID, big.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, ok)
	b.reserve(t, res(v, user, 3, ""))
	_, err = b.store.Reserve(ctx, res(v, user, 1, ""))
	require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	snap := b.balanced(t, v)
	require.Equal(t, int64(10), snap.Held)
}

func TestReleaseModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)

	t.Run("any keeps the request key and is idempotent", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		r := res(v, next(), 2, "k-any")
		b.reserve(t, r)
		ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		for range 3 {
			ok, err = b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
			require.NoError(t, err)
			require.False(t, ok)
		}
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 10, Total: 10}, snap)
		// A replay returns the same, now final, order and holds nothing.
		retry := r
		retry.OrderID = next()
		got, err := b.store.Reserve(ctx, retry)
		require.NoError(t, err)
		require.True(t, got.Replayed)
		require.Equal(t, r.OrderID, got.OrderID)
		_, live, err := b.store.Hold(ctx, r.OrderID, []int64{v.ID})
		require.NoError(t, err)
		require.False(t, live)
		require.Equal(t, int64(10), b.balanced(t, v).Left)
	})
	t.Run("unsent forgets the request key", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		r := res(v, next(), 2, "k-unsent")
		b.reserve(t, r)
		ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseUnsent)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseUnsent)
		require.NoError(t, err)
		require.False(t, ok)
		// A retry with the same key is a fresh attempt...
		retry := r
		retry.OrderID = next()
		got, err := b.store.Reserve(ctx, retry)
		require.NoError(t, err)
		require.False(t, got.Replayed)
		require.Equal(t, retry.OrderID, got.OrderID)
		b.promise(t, retry)
		// ...and a late resend of the released order never holds again.
		late, err := b.store.Reserve(ctx, r)
		require.NoError(t, err)
		require.True(t, late.Replayed)
		snap := b.balanced(t, v)
		require.Equal(t, int64(2), snap.Held)
		require.Equal(t, int64(1), snap.Holds)
	})
	t.Run("ifpending leaves confirmed orders alone", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		pending, confirmed := res(v, next(), 1, ""), res(v, next(), 2, "")
		for _, r := range []seckill.Reservation{pending, confirmed} {
			b.reserve(t, r)
		}
		require.NoError(t, b.store.Confirm(ctx, []seckill.Reservation{confirmed}))
		require.NoError(t, b.store.Confirm(ctx, []seckill.Reservation{confirmed}), "confirm is idempotent")

		st, err := b.store.ReleaseStatus(ctx, v.ID, confirmed.OrderID, seckill.ReleaseIfPending)
		require.NoError(t, err)
		require.Equal(t, redisstock.AlreadyConfirmed, st)
		ok, err := b.store.Release(ctx, v.ID, confirmed.OrderID, seckill.ReleaseIfPending)
		require.NoError(t, err)
		require.False(t, ok)

		st, err = b.store.ReleaseStatus(ctx, v.ID, pending.OrderID, seckill.ReleaseIfPending)
		require.NoError(t, err)
		require.Equal(t, redisstock.Released, st)
		st, err = b.store.ReleaseStatus(ctx, v.ID, pending.OrderID, seckill.ReleaseIfPending)
		require.NoError(t, err)
		require.Equal(t, redisstock.NothingReleased, st)

		// A confirmed order is still released by a cancel or timeout.
		ok, err = b.store.Release(ctx, v.ID, confirmed.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.True(t, ok)
		snap := b.balanced(t, v)
		require.Equal(t, redisstock.Snapshot{OnSale: true, Left: 10, Total: 10}, snap)
	})
	t.Run("refused keeps the unit off sale", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		r := res(v, next(), 2, "k-refused")
		b.reserve(t, r)
		ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseRefused)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.False(t, ok, "released at most once, whatever the mode")
		snap, err := b.store.Snapshot(ctx, v.ID)
		require.NoError(t, err)
		require.True(t, snap.Balanced(), "unbalanced: %+v", snap)
		require.Equal(t, int64(8), snap.Left, "the refused units are not back on sale")
		require.Equal(t, int64(8), snap.Total, "they left the total, drift the healer repairs")
		require.Zero(t, snap.Held)
		// The shopper's per-user count is given back, as by any release.
		b.reserve(t, res(v, r.UserID, 2, ""))
	})
	t.Run("unknown order and bad mode", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		ok, err := b.store.Release(ctx, v.ID, next(), seckill.ReleaseAny)
		require.NoError(t, err)
		require.False(t, ok)
		_, err = b.store.Release(ctx, v.ID, next(), seckill.ReleaseMode(42))
		require.ErrorIs(t, err, apperr.ErrInvalidInput)
	})
	t.Run("after unwarm nothing is resurrected", func(t *testing.T) {
		v := b.onSale(t, 10, 5)
		r := res(v, next(), 1, "")
		b.reserve(t, r)
		require.NoError(t, b.store.Unwarm(ctx, v.ID))
		ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
		require.NoError(t, err)
		require.False(t, ok)
		n, err := b.rdb.Exists(ctx, redisstock.VoucherKeys(v.ID).Meta).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestConcurrentBuyersNeverOversell(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testConcurrentBuyersNeverOversell)
}

func testConcurrentBuyersNeverOversell(t *testing.T, b bundle) {
	ctx := context.Background()
	v := b.onSale(t, 100, 1)

	var held, soldOut atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for range 1000 {
		wg.Go(func() {
			_, err := b.store.Reserve(ctx, res(v, next(), 1, ""))
			switch {
			case err == nil:
				held.Add(1)
			case errors.Is(err, seckill.ErrSoldOut):
				soldOut.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(100), held.Load())
	require.Equal(t, int64(900), soldOut.Load())
	snap := b.balanced(t, v)
	require.Zero(t, snap.Left)
	require.Equal(t, int64(100), snap.Held)
	require.Equal(t, int64(100), snap.Pending)
}

func TestConcurrentReplaysAndQuantities(t *testing.T) {
	t.Parallel()
	onEveryShape(t, testConcurrentReplaysAndQuantities)
}

func testConcurrentReplaysAndQuantities(t *testing.T, b bundle) {
	ctx := context.Background()
	const limit = 3
	v := b.onSale(t, 200, limit)

	// 300 users, each sending their one request key 4 times at once with a
	// quantity of 1 to 3, and a second, keyless attempt.
	type answer struct {
		user, orderID, qty int64
		replayed, keyed    bool
	}
	answers := make(chan answer, 300*5)
	var wg sync.WaitGroup
	for u := range 300 {
		user := next()
		qty := int64(u%3 + 1)
		key := "idem-" + strconv.Itoa(u)
		for range 4 {
			wg.Go(func() {
				got, err := b.store.Reserve(ctx, res(v, user, qty, key))
				if err == nil {
					answers <- answer{user, got.OrderID, qty, got.Replayed, true}
				}
			})
		}
		wg.Go(func() {
			got, err := b.store.Reserve(ctx, res(v, user, 1, ""))
			if err == nil {
				answers <- answer{user, got.OrderID, 1, got.Replayed, false}
			}
		})
	}
	wg.Wait()
	close(answers)

	keyed := map[int64]map[int64]bool{} // user -> order ids answered for the key
	heldBy := map[int64]int64{}
	var held int64
	for a := range answers {
		if a.keyed {
			if keyed[a.user] == nil {
				keyed[a.user] = map[int64]bool{}
			}
			keyed[a.user][a.orderID] = true
		}
		if a.replayed {
			continue
		}
		heldBy[a.user] += a.qty
		held += a.qty
	}
	for u, orders := range keyed {
		require.Len(t, orders, 1, "user %d got several orders for one request key", u)
	}
	snap := b.balanced(t, v)
	require.Equal(t, held, snap.Held, "every non-replayed answer is exactly one hold")
	require.LessOrEqual(t, snap.Held, v.StockTotal)
	for u, q := range heldBy {
		require.LessOrEqual(t, q, int64(limit), "user %d", u)
	}
}

func TestWarmAndStockLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 10, 2)
	b.reserve(t, res(v, next(), 2, ""))

	// Warming again with the same values keeps the live stock.
	require.NoError(t, b.store.Warm(ctx, v))
	changed := v
	changed.StockTotal, changed.StockLeft = 20, 20
	require.ErrorIs(t, b.store.Warm(ctx, changed), apperr.ErrConflict)
	changed = v
	changed.EndAt = changed.EndAt.Add(time.Hour)
	require.ErrorIs(t, b.store.Warm(ctx, changed), apperr.ErrConflict)

	bad := v
	bad.ID = next()
	bad.StockLeft = bad.StockTotal + 1
	require.ErrorIs(t, b.store.Warm(ctx, bad), apperr.ErrInvalidInput)
	bad.StockLeft, bad.EndAt = 1, bad.BeginAt
	require.ErrorIs(t, b.store.Warm(ctx, bad), apperr.ErrInvalidInput)

	meta, err := b.rdb.HGetAll(ctx, redisstock.VoucherKeys(v.ID).Meta).Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"stock": "8", "total": "10", "limit": "2", "price": "990",
		"begin_ms": strconv.FormatInt(v.BeginAt.UnixMilli(), 10),
		"end_ms":   strconv.FormatInt(v.EndAt.UnixMilli(), 10),
		"held":     "2", "holds": "1",
		"expire_ms": strconv.FormatInt(v.EndAt.Add(seckill.DefaultStateGrace).UnixMilli(), 10),
	}, meta)

	other := b.onSale(t, 7, 1)
	missing := next()
	left, err := b.store.StockLeft(ctx, v.ID, other.ID, missing)
	require.NoError(t, err)
	require.Equal(t, map[int64]int64{v.ID: 8, other.ID: 7}, left)
	left, err = b.store.StockLeft(ctx)
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestUnwarmForgetsEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 10, 3)
	for range 3 {
		b.reserve(t, res(v, next(), 2, "k"))
	}
	released := res(v, next(), 1, "gone")
	b.reserve(t, released)
	_, err := b.store.Release(ctx, v.ID, released.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)

	require.NoError(t, b.store.Unwarm(ctx, v.ID))
	keys, err := b.rdb.Keys(ctx, fmt.Sprintf("seckill:{v%d}:*", v.ID)).Result()
	require.NoError(t, err)
	require.Empty(t, keys)
	_, err = b.store.Reserve(ctx, res(v, next(), 1, ""))
	require.ErrorIs(t, err, seckill.ErrStockMissing)
	snap, err := b.store.Snapshot(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, redisstock.Snapshot{}, snap)
	require.NoError(t, b.store.Unwarm(ctx, v.ID), "unwarm is idempotent")
}

func TestHoldAndUserHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v1, v2 := b.onSale(t, 10, 5), b.onSale(t, 10, 5)
	user := next()
	var mine []seckill.Reservation
	for _, r := range []seckill.Reservation{res(v1, user, 1, "a"), res(v2, user, 2, ""), res(v1, user, 3, "")} {
		b.reserve(t, r)
		mine = append(mine, r)
	}
	_, err := b.store.Reserve(ctx, res(v1, next(), 1, "")) // someone else's
	require.NoError(t, err)

	h, ok, err := b.store.Hold(ctx, mine[1].OrderID, []int64{v1.ID, v2.ID})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, mine[1].VoucherID, h.VoucherID)
	require.Equal(t, mine[1].UserID, h.UserID)
	require.Equal(t, mine[1].Quantity, h.Quantity)
	require.WithinDuration(t, time.Now(), h.ReservedAt, 5*time.Second)
	_, ok, err = b.store.Hold(ctx, mine[1].OrderID, []int64{v1.ID})
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = b.store.Hold(ctx, next(), nil)
	require.NoError(t, err)
	require.False(t, ok)

	got, err := b.store.UserHolds(ctx, user, []int64{v1.ID, v2.ID, next()})
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, want := range []seckill.Reservation{mine[2], mine[1], mine[0]} {
		require.Equal(t, want.OrderID, got[i].OrderID, "newest first")
		require.Equal(t, want.Quantity, got[i].Quantity)
		require.Equal(t, want.RequestKey, got[i].RequestKey)
	}
	// Confirmed holds are still live; released ones are gone.
	require.NoError(t, b.store.Confirm(ctx, mine[:1]))
	_, err = b.store.Release(ctx, v1.ID, mine[2].OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	got, err = b.store.UserHolds(ctx, user, []int64{v1.ID, v2.ID})
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, mine[1].OrderID, got[0].OrderID)
	require.Equal(t, mine[0].OrderID, got[1].OrderID)

	// The release gave the user's count back: 1 + 4 of 5 fit, one more
	// does not; releasing the first of their orders leaves the newest.
	more := res(v1, user, 4, "")
	b.reserve(t, more)
	_, err = b.store.Reserve(ctx, res(v1, user, 1, ""))
	require.ErrorIs(t, err, seckill.ErrLimitExceeded)
	_, err = b.store.Release(ctx, v1.ID, mine[0].OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	got, err = b.store.UserHolds(ctx, user, []int64{v1.ID})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, more.OrderID, got[0].OrderID)

	got, err = b.store.UserHolds(ctx, next(), []int64{v1.ID, v2.ID})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestPendingForTheReconciler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 100, 5)
	var early []seckill.Reservation
	for range 4 {
		r := res(v, next(), 1, "")
		b.reserve(t, r)
		early = append(early, r)
	}
	time.Sleep(5 * time.Millisecond)
	cut := serverNow(t, b.rdb)
	time.Sleep(5 * time.Millisecond)
	b.reserve(t, res(v, next(), 1, ""))
	require.NoError(t, b.store.Confirm(ctx, early[:1]))

	got, err := b.store.Pending(ctx, v.ID, cut, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, r := range got {
		require.Equal(t, early[i+1].OrderID, r.OrderID, "oldest first")
		require.Equal(t, early[i+1].UserID, r.UserID)
		require.True(t, r.ReservedAt.Before(cut))
	}
	got, err = b.store.Pending(ctx, v.ID, cut, 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = b.store.Pending(ctx, v.ID, serverNow(t, b.rdb).Add(time.Second), 100)
	require.NoError(t, err)
	require.Len(t, got, 4)
	_, err = b.store.Pending(ctx, v.ID, cut, 0)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	require.Equal(t, int64(4), b.balanced(t, v).Pending)
}

func TestScriptCacheFlushFallsBackToEval(t *testing.T) {
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 10, 5)
	require.NoError(t, b.rdb.ScriptFlush(ctx).Err())
	r := res(v, next(), 1, "")
	b.reserve(t, r)
	require.NoError(t, b.rdb.ScriptFlush(ctx).Err())
	ok, err := b.store.Release(ctx, v.ID, r.OrderID, seckill.ReleaseAny)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.rdb.ScriptFlush(ctx).Err())
	b.balanced(t, v)
}
