package redisstock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// scriptBuy is one buy as reserve.lua's ARGV spells it.
type scriptBuy struct {
	user, order, qty int64
	key              string
}

func (b scriptBuy) args() []any { return []any{b.user, b.order, b.qty, b.key} }

// TestReserveBatchDecidesAsOneByOne sends the same buys to two vouchers of
// the same state: one by one through reserve.lua, and in batches of every
// size through reserve_batch.lua. The buys mix few users, repeated request
// keys, retries of the same call, order ids taken by another user, two
// quantities against a small limit and a stock that runs out, with some
// keyed holds promised between batches, so every code reserve.lua answers
// comes up. Each buy must get the same answer from both, and both vouchers
// must end in the same state (but for the hold times).
func TestReserveBatchDecidesAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	now := serverNow(t, b.rdb)
	rng := rand.New(rand.NewPCG(7, 42))

	for _, c := range []struct {
		name       string
		begin, end time.Time
		warm       bool
	}{
		{"on sale", now.Add(-time.Minute), now.Add(time.Hour), true},
		{"not started", now.Add(time.Hour), now.Add(2 * time.Hour), true},
		{"ended", now.Add(-2 * time.Hour), now.Add(-time.Hour), true},
		{"not on sale", now.Add(-time.Minute), now.Add(time.Hour), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, many := voucher(30, 3, c.begin, c.end), voucher(30, 3, c.begin, c.end)
			if c.warm {
				require.NoError(t, b.store.Warm(ctx, one))
				require.NoError(t, b.store.Warm(ctx, many))
			}
			ko, km := redisstock.VoucherKeys(one.ID), redisstock.VoucherKeys(many.ID)
			users := make([]int64, 12)
			for i := range users {
				users[i] = next()
			}
			var sent []scriptBuy
			codes := map[int64]int{} // reserve.lua's answers, by code
			for round := 0; round < 60; round++ {
				batch := make([]scriptBuy, 1+rng.IntN(12))
				for i := range batch {
					buy := scriptBuy{user: users[rng.IntN(len(users))], order: next(), qty: 1 + rng.Int64N(2)}
					if rng.IntN(4) != 0 {
						buy.key = fmt.Sprintf("k%d", rng.IntN(2))
					}
					if len(sent) > 0 && rng.IntN(6) == 0 {
						earlier := sent[rng.IntN(len(sent))]
						buy = earlier // a retry of the very same call
						if rng.IntN(2) == 0 {
							buy.user = users[rng.IntN(len(users))] // or its order id, taken
						}
					}
					batch[i] = buy
					sent = append(sent, buy)
				}

				var want [][]any
				for _, buy := range batch {
					reply, err := b.rdb.Eval(ctx, lua.Reserve, []string{ko.Meta, ko.Ledger, ko.Pending}, buy.args()...).Slice()
					require.NoError(t, err)
					want = append(want, reply)
					codes[reply[0].(int64)]++
				}
				args := []any{len(batch), 0, 1} // no rate limit
				for _, buy := range batch {
					args = append(args, buy.args()...)
				}
				reply, err := b.rdb.Eval(ctx, lua.ReserveBatch, []string{km.Meta, km.Ledger, km.Pending}, args...).Slice()
				require.NoError(t, err)
				require.Len(t, reply, 3*len(batch))
				for i := range batch {
					require.Equal(t, want[i], reply[3*i:3*i+3], "round %d, buy %d: %+v", round, i, batch[i])
				}

				// Promise a fifth of the undecided holds, the same in both.
				marks, err := b.rdb.HKeys(ctx, ko.Ledger).Result()
				require.NoError(t, err)
				for _, f := range marks {
					if strings.HasPrefix(f, "s") && rng.IntN(5) == 0 {
						require.NoError(t, b.rdb.HDel(ctx, ko.Ledger, f).Err())
						require.NoError(t, b.rdb.HDel(ctx, km.Ledger, f).Err())
					}
				}
			}

			require.Equal(t, ledgerWithoutTimes(t, b.rdb, ko), ledgerWithoutTimes(t, b.rdb, km))
			for _, k := range [][2]string{{ko.Meta, km.Meta}, {ko.Pending, km.Pending}} {
				require.Equal(t, b.rdb.Type(ctx, k[0]).Val(), b.rdb.Type(ctx, k[1]).Val())
			}
			mo, err := b.rdb.HMGet(ctx, ko.Meta, "stock", "held", "holds").Result()
			require.NoError(t, err)
			mm, err := b.rdb.HMGet(ctx, km.Meta, "stock", "held", "holds").Result()
			require.NoError(t, err)
			require.Equal(t, mo, mm)
			po, err := b.rdb.ZRange(ctx, ko.Pending, 0, -1).Result()
			require.NoError(t, err)
			pm, err := b.rdb.ZRange(ctx, km.Pending, 0, -1).Result()
			require.NoError(t, err)
			require.ElementsMatch(t, po, pm)
			if c.name == "on sale" {
				for code := range 9 {
					if code != 2 && code != 3 && code != 4 {
						require.Positive(t, codes[int64(code)], "code %d came up: %v", code, codes)
					}
				}
				require.Equal(t, "0", mm[0], "the stock ran out along the way")
				b.balanced(t, many)
			}
		})
	}
}

// ledgerWithoutTimes is a bucket's ledger with each hold's time left out:
// the two vouchers of a comparison held at different moments.
func ledgerWithoutTimes(t *testing.T, rdb redis.UniversalClient, k redisstock.Keys) map[string]string {
	t.Helper()
	all, err := rdb.HGetAll(context.Background(), k.Ledger).Result()
	require.NoError(t, err)
	for f, v := range all {
		if parts := strings.SplitN(v, ":", 4); len(parts) == 4 {
			parts[2] = "t"
			all[f] = strings.Join(parts, ":")
		}
	}
	return all
}

func TestReserveBatchRefusesBadArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 10, 5)
	k := redisstock.VoucherKeys(v.ID)
	keys := []string{k.Meta, k.Ledger, k.Pending}
	for _, args := range [][]any{
		{},
		{0, 0, 1},
		{2, 0, 1, next(), next(), 1, ""}, // fewer buys than said
		{1, 0, 1, next(), next(), 0, ""}, // quantity 0
		{2, 0, 1, next(), next(), 1, "", "bob", next(), 1, ""},     // no user id
		{2, 0, 1, next(), next(), 1, "", next(), next(), 1.5, "k"}, // a fraction
		{1, -5, 1, next(), next(), 1, ""},                          // a negative interval
		{1, 1000, 0, next(), next(), 1, ""},                        // no burst
	} {
		err := b.rdb.Eval(ctx, lua.ReserveBatch, keys, args...).Err()
		require.ErrorContains(t, err, "bad arguments", "%v", args)
	}
	snap := b.balanced(t, v)
	require.Equal(t, int64(10), snap.Left, "a refused batch holds nothing, not even its good buys")
}

// TestReserveBatchCrowd buys through the Store's batcher from many
// goroutines at once, on a plain server and on a Redis Cluster: a few
// shoppers, each sending many keyed and unkeyed buys, some of them given up
// at once, with the gateway's promise after every hold. What holds: the
// stock held is exactly what was answered held (sold == accepted, a buy
// given up being given back), never more than the stock; no shopper holds
// more than the limit; every answer of one Idempotency-Key names one order,
// and a last replay of each key answers that order.
func TestReserveBatchCrowd(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		store := redisstock.New(redisstock.Config{Redis: b.rdb, ReserveBatch: 8})
		now := serverNow(t, b.rdb)
		v := voucher(60, 3, now.Add(-time.Minute), now.Add(time.Hour))
		require.NoError(t, store.Warm(ctx, v))

		type shopperKey struct {
			user int64
			key  string
		}
		var (
			mu       sync.Mutex
			accepted int64                    // units answered held
			byUser   = map[int64]int64{}      // units answered held, per user
			byKey    = map[shopperKey]int64{} // the order each key was answered with
			wg       sync.WaitGroup
		)
		users := make([]int64, 40)
		for i := range users {
			users[i] = next()
		}
		for i := range 600 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				user := users[i%len(users)]
				key := ""
				if i%3 != 0 {
					key = fmt.Sprintf("k%d", i%2)
				}
				r := res(v, user, 1+int64(i%2), key)
				bctx := ctx
				if i%7 == 0 {
					// Given up before or while its batch is in flight: never
					// counted, and given back if Redis held it.
					c, cancel := context.WithTimeout(ctx, time.Duration(i%5)*100*time.Microsecond)
					defer cancel()
					bctx = c
				}
				got, err := store.Reserve(bctx, r)
				if err != nil {
					if !errors.Is(err, seckill.ErrSoldOut) && !errors.Is(err, seckill.ErrLimitExceeded) &&
						!errors.Is(err, seckill.ErrUndecided) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("buy %d: %v", i, err)
					}
					return
				}
				if !got.Replayed {
					if err := store.Promise(ctx, r); err != nil {
						t.Errorf("promise %d: %v", i, err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !got.Replayed {
					accepted += r.Quantity
					byUser[user] += r.Quantity
				}
				if key == "" {
					return
				}
				sk := shopperKey{user, key}
				if first, ok := byKey[sk]; ok {
					if first != got.OrderID {
						t.Errorf("user %d key %s answered orders %d and %d", user, key, first, got.OrderID)
					}
				} else {
					byKey[sk] = got.OrderID
				}
			}()
		}
		wg.Wait()

		require.Positive(t, accepted)
		require.LessOrEqual(t, accepted, v.StockTotal)
		for u, n := range byUser {
			require.LessOrEqual(t, n, v.PerUserLimit, "user %d", u)
		}
		// Buys given up may still be on their way back: wait for them.
		require.Eventually(t, func() bool {
			snap, err := store.Snapshot(ctx, v.ID)
			return err == nil && snap.Held == accepted
		}, 5*time.Second, 10*time.Millisecond, "sold == accepted")
		b.balanced(t, v)

		for sk, order := range byKey {
			got, err := store.Reserve(ctx, res(v, sk.user, 1, sk.key))
			require.NoError(t, err)
			require.Equal(t, seckill.ReserveResult{OrderID: order, Replayed: true, StockLeft: got.StockLeft}, got)
		}
	})
}

// TestReserveUserLimit is the shoppers' rate limit inside the reservation:
// GCRA per shopper and bucket, as redis_rate counts it, on a plain server and
// on a Redis Cluster. A crowd of one shopper's buys gets exactly the burst
// through; others are not touched; a replay of a known key and a retry of
// the very same call are answered, not refused; and the limit's state is
// the ledger's g<userID>, in Redis's microseconds.
func TestReserveUserLimit(t *testing.T) {
	onEveryShape(t, func(t *testing.T, b bundle) {
		ctx := context.Background()
		store := redisstock.New(redisstock.Config{Redis: b.rdb, UserLimit: redisstock.UserLimit{Rate: 1, Burst: 3}})
		v := b.onSale(t, 100, 100)
		user := next()

		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			held    []seckill.Reservation
			limited int
		)
		for range 20 {
			wg.Go(func() {
				r := res(v, user, 1, fmt.Sprintf("k%d", next()))
				_, err := store.Reserve(ctx, r)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					held = append(held, r)
				case errors.Is(err, apperr.ErrRateLimited):
					limited++
					wait, ok := retryAfter(err)
					if !ok || wait <= 0 || wait > time.Second {
						t.Errorf("retry after %v (%v)", wait, ok)
					}
				default:
					t.Errorf("buy: %v", err)
				}
			})
		}
		wg.Wait()
		require.Len(t, held, 3, "the burst, and not one more")
		require.Equal(t, 17, limited)

		// redis_rate, asked the same on its own key, agrees.
		lim := redis_rate.NewLimiter(b.rdb)
		key := fmt.Sprintf("test:rl:%d", next())
		allowed := 0
		for range 20 {
			res, err := lim.Allow(ctx, key, redis_rate.Limit{Rate: 1, Burst: 3, Period: time.Second})
			require.NoError(t, err)
			allowed += res.Allowed
		}
		require.Equal(t, 3, allowed)

		// Another shopper has their own budget; a replay and a retry of the
		// same call are answered while the first is out of budget.
		_, err := store.Reserve(ctx, res(v, next(), 1, ""))
		require.NoError(t, err)
		r := held[0]
		require.NoError(t, store.Promise(ctx, r))
		got, err := store.Reserve(ctx, res(v, user, 1, r.RequestKey))
		require.NoError(t, err)
		require.Equal(t, seckill.ReserveResult{OrderID: r.OrderID, Replayed: true, StockLeft: got.StockLeft}, got)
		got, err = store.Reserve(ctx, r)
		require.NoError(t, err)
		require.Equal(t, r.OrderID, got.OrderID)
		require.False(t, got.Replayed)

		// Its state: a theoretical arrival time 5 s ahead leaves 5 + 1 - 3
		// seconds to wait.
		ledger := redisstock.BucketKeys(v.ID, 0).Ledger
		stranger := next()
		tat := serverNow(t, b.rdb).Add(5 * time.Second).UnixMicro()
		require.NoError(t, b.rdb.HSet(ctx, ledger, fmt.Sprintf("g%d", stranger), tat).Err())
		_, err = store.Reserve(ctx, res(v, stranger, 1, ""))
		require.ErrorIs(t, err, apperr.ErrRateLimited)
		wait, _ := retryAfter(err)
		require.InDelta(t, 3*time.Second, wait, float64(500*time.Millisecond), "waits %v", wait)
		b.balanced(t, v)
	})
}

// retryAfter is the Retry-After an error carries (apperr.WithRetryAfter).
func retryAfter(err error) (time.Duration, bool) {
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) {
		return 0, false
	}
	return ra.RetryAfter(), true
}
