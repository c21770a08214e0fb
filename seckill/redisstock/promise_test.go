package redisstock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// A replay of an Idempotency-Key is answered with its order only once that
// order's fate is decided (seckill/RULES.md, "A 202 stands"): a keyed hold
// is undecided from the script that writes it until its gateway promises it
// (its message is written), a worker persists it, or it is given back. Each
// way is tried on a voucher of one bucket and of three, on both shapes; the
// readers of the request keys (RequestKnown, RequestOrder, RequestKeys) say
// the same as the script, and no undecided mark outlives its hold's decision.
func TestReplayAnswersOnlyADecidedOrder(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		for _, shards := range []int{1, 3} {
			v := b.shardedOnSale(t, shards, 20, 5)
			replay := func(r seckill.Reservation) (seckill.ReserveResult, error) {
				again := r
				again.OrderID = next()
				return b.store.Reserve(ctx, again)
			}
			request := func(r seckill.Reservation) redisstock.Request {
				return redisstock.Request{UserID: r.UserID, Key: r.RequestKey}
			}
			replayed := func(r seckill.Reservation) {
				t.Helper()
				got, err := replay(r)
				require.NoError(t, err)
				require.True(t, got.Replayed)
				require.Equal(t, r.OrderID, got.OrderID)
			}

			// Undecided: its gateway has not heard from Kafka yet.
			r := res(v, next(), 1, "k")
			b.reserve(t, r)
			_, err := replay(r)
			require.ErrorIs(t, err, seckill.ErrUndecided)
			require.ErrorIs(t, err, apperr.ErrUnavailable, "a caller that knows nothing of it answers 503")
			known, err := b.store.RequestKnown(ctx, v.ID, request(r))
			require.NoError(t, err)
			require.True(t, known, "the key is known: its captcha was used")
			_, _, err = b.store.RequestOrder(ctx, v.ID, request(r))
			require.ErrorIs(t, err, seckill.ErrUndecided)
			keys, complete, err := b.store.RequestKeys(ctx, v.ID, 100)
			require.NoError(t, err)
			require.True(t, complete)
			require.Contains(t, keys, request(r))
			require.Equal(t, redisstock.UndecidedOrder, keys[request(r)], "a copy never answers it")
			// Its own gateway's retry of the very same call goes on.
			got := b.reserve(t, r)
			require.Equal(t, seckill.ReserveResult{OrderID: r.OrderID, StockLeft: got.StockLeft}, got)
			require.EqualValues(t, 1, b.balanced(t, v).Holds, "the refused replays held nothing")

			// Promised: its message is written.
			b.promise(t, r)
			replayed(r)
			id, found, err := b.store.RequestOrder(ctx, v.ID, request(r))
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, r.OrderID, id)
			keys, _, err = b.store.RequestKeys(ctx, v.ID, 100)
			require.NoError(t, err)
			require.Equal(t, r.OrderID, keys[request(r)])

			// Persisted by a worker, never promised (its gateway died after
			// the write): it left pending.
			p := res(v, next(), 1, "k")
			b.reserve(t, p)
			require.NoError(t, b.store.Confirm(ctx, []seckill.Reservation{p}))
			replayed(p)

			// Given back unsent (not written, or fenced): the key is
			// forgotten, and the replay holds anew, a new attempt.
			u := res(v, next(), 1, "k")
			b.reserve(t, u)
			ok, err := b.store.Release(ctx, v.ID, u.OrderID, seckill.ReleaseUnsent)
			require.NoError(t, err)
			require.True(t, ok)
			got, err = replay(u)
			require.NoError(t, err)
			require.False(t, got.Replayed)
			require.NotEqual(t, u.OrderID, got.OrderID)
			anew := u
			anew.OrderID = got.OrderID
			b.promise(t, anew)

			// Released with its key kept (a cancel, the reconciler): the
			// replay answers the final order.
			c := res(v, next(), 1, "k")
			b.reserve(t, c)
			ok, err = b.store.Release(ctx, v.ID, c.OrderID, seckill.ReleaseAny)
			require.NoError(t, err)
			require.True(t, ok)
			replayed(c)
			require.NoError(t, b.store.Promise(ctx, c), "a promise after the release changes nothing")
			require.NoError(t, b.store.Promise(ctx, res(v, next(), 1, "")), "an unkeyed hold has nothing to promise")

			require.Zero(t, undecidedMarks(t, b, v, shards), "every mark went with its hold's decision")
			b.balanced(t, v)
		}
	})
}

// undecidedMarks counts the undecided fields of v's ledgers.
func undecidedMarks(t *testing.T, b bundle, v seckill.Voucher, shards int) int {
	t.Helper()
	n := 0
	for bucket := range shards {
		fields, err := b.rdb.HKeys(context.Background(), redisstock.BucketKeys(v.ID, bucket).Ledger).Result()
		require.NoError(t, err)
		for _, f := range fields {
			if strings.HasPrefix(f, "s") {
				n++
			}
		}
	}
	return n
}

// The promises of one bucket that meet in a process share one HDEL: many
// concurrent promises cost Redis fewer HDELs than promises, each returns
// only once its own mark is gone, and a replay of each key then answers
// with its order.
func TestConcurrentPromisesShareAnHDEL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, rdb := stacktest.PrivateRedis(t)
	b := bundle{rdb: rdb, store: redisstock.New(redisstock.Config{Redis: rdb})}
	v := b.onSale(t, 100, 1)
	const crowd = 30
	holds := make([]seckill.Reservation, crowd)
	for i := range holds {
		holds[i] = res(v, next(), 1, "k")
		b.reserve(t, holds[i])
	}
	require.Equal(t, crowd, undecidedMarks(t, b, v, 1))

	before := commandCalls(t, rdb, "hdel")
	var wg sync.WaitGroup
	for _, r := range holds {
		wg.Go(func() {
			assert.NoError(t, b.store.Promise(ctx, r))
			assert.False(t, undecidedMark(t, b, r), "promised only once its own mark is gone")
		})
	}
	wg.Wait()
	assert.Less(t, commandCalls(t, rdb, "hdel")-before, int64(crowd), "promises that meet share an HDEL")
	require.Zero(t, undecidedMarks(t, b, v, 1))
	for _, r := range holds {
		replay := r
		replay.OrderID = next()
		got := b.reserve(t, replay)
		assert.True(t, got.Replayed)
		assert.Equal(t, r.OrderID, got.OrderID)
	}
}

// undecidedMark reports whether r's hold still carries its undecided mark.
func undecidedMark(t *testing.T, b bundle, r seckill.Reservation) bool {
	t.Helper()
	ok, err := b.rdb.HExists(context.Background(), redisstock.BucketKeys(r.VoucherID, 0).Ledger, "s"+strconv.FormatInt(r.OrderID, 10)).Result()
	require.NoError(t, err)
	return ok
}
