package eligibility_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/eligibility"
)

func newStore(t *testing.T) (*eligibility.Store, redis.UniversalClient) {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return eligibility.NewStore(rdb, time.Minute), rdb
}

func voucher(id int64, rule seckill.EntryRule) seckill.Voucher {
	now := time.Now()
	return seckill.Voucher{ID: id, BeginAt: now, EndAt: now.Add(time.Hour), Entry: &rule,
		WaitingRoom: &seckill.WaitingRoom{AdmitPerSecond: 10}}
}

// One place per person: 64 accounts of one person claim at once, and
// exactly one gets it; that account claims again and keeps it; another
// person is not disturbed. The claim's key expires after the sale.
func TestOnePlacePerPerson(t *testing.T) {
	store, rdb := newStore(t)
	ctx := context.Background()
	v := voucher(7001, seckill.EntryRule{TokenRequired: true})

	var won atomic.Int64
	var winner atomic.Int64
	var wg sync.WaitGroup
	for u := range int64(64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := store.Claim(ctx, v, "person-x", 100+u)
			if err == nil {
				won.Add(1)
				winner.Store(100 + u)
				return
			}
			require.ErrorIs(t, err, seckill.ErrNotEligible)
		}()
	}
	wg.Wait()
	require.Equal(t, int64(1), won.Load(), "one account of the person holds the place")
	require.NoError(t, store.Claim(ctx, v, "person-x", winner.Load()), "the same account again keeps it")
	require.ErrorIs(t, store.Claim(ctx, v, "person-x", 99), seckill.ErrNotEligible)
	require.NoError(t, store.Claim(ctx, v, "person-y", 99), "another person")
	require.NoError(t, store.Claim(ctx, voucher(7002, seckill.EntryRule{TokenRequired: true}), "person-x", 99),
		"one place per voucher: another voucher's is the person's own")

	st, err := store.Stats(ctx, v)
	require.NoError(t, err)
	require.Equal(t, eligibility.Stats{Persons: 2}, st)
	ttl, err := rdb.PTTL(ctx, "eligibility:{v7001}:persons").Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute, "kept until the sale's end and its grace")
	keys, err := rdb.HKeys(ctx, "eligibility:{v7001}:persons").Result()
	require.NoError(t, err)
	for _, k := range keys {
		require.Len(t, k, 64, "a person key is kept as its SHA-256, never as sent")
	}
}

// The allowlist takes user ids and person keys, answers for both, and is
// emptied on demand.
func TestAllowlist(t *testing.T) {
	store, _ := newStore(t)
	ctx := context.Background()
	v := voucher(7010, seckill.EntryRule{Allowlist: true})

	ok, err := store.Allowed(ctx, v, 1, "")
	require.NoError(t, err)
	require.False(t, ok, "an empty list takes nobody")
	n, err := store.AddAllowlist(ctx, v, eligibility.Allowlist{UserIDs: []int64{1, 2, 2}, Persons: []string{"p-1"}})
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "the same entry twice is one")
	n, err = store.AddAllowlist(ctx, v, eligibility.Allowlist{UserIDs: []int64{3}})
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "uploads add up")

	for _, c := range []struct {
		user   int64
		person string
		want   bool
	}{{1, "", true}, {3, "", true}, {4, "", false}, {4, "p-1", true}, {4, "p-2", false}} {
		ok, err := store.Allowed(ctx, v, c.user, c.person)
		require.NoError(t, err)
		require.Equal(t, c.want, ok, "user %d person %q", c.user, c.person)
	}
	require.NoError(t, store.ClearAllowlist(ctx, v))
	ok, err = store.Allowed(ctx, v, 1, "")
	require.NoError(t, err)
	require.False(t, ok)
}

// The gate: a voucher's rule picks what is asked; the token is judged
// before the list; the person's place is claimed last.
func TestGate(t *testing.T) {
	store, _ := newStore(t)
	ctx := context.Background()
	m := newMerchant(t, "shop")
	gate := eligibility.NewGate(eligibility.NewVerifier(eligibility.Keys{m.kid: m.pub}, nil), store)
	token := func(voucherID, user int64, person string) string {
		return m.sign(t, claims(func(c *eligibility.Claims) {
			c.VoucherID, c.Subject, c.Person = strconv.FormatInt(voucherID, 10), strconv.FormatInt(user, 10), person
		}))
	}

	open := seckill.Voucher{ID: 7020}
	e, err := gate.Check(ctx, open, 1, "")
	require.NoError(t, err, "no rule takes everyone")
	require.NoError(t, gate.Claim(ctx, open, 1, e))

	tok := voucher(7021, seckill.EntryRule{TokenRequired: true})
	_, err = gate.Check(ctx, tok, 1, "")
	require.ErrorIs(t, err, seckill.ErrNotEligible)
	e, err = gate.Check(ctx, tok, 1, token(7021, 1, "alice"))
	require.NoError(t, err)
	require.NoError(t, gate.Claim(ctx, tok, 1, e))
	e2, err := gate.Check(ctx, tok, 2, token(7021, 2, "alice"))
	require.NoError(t, err, "a second account of alice has a valid token...")
	require.ErrorIs(t, gate.Claim(ctx, tok, 2, e2), seckill.ErrNotEligible, "...but alice holds her place")

	both := voucher(7022, seckill.EntryRule{TokenRequired: true, Allowlist: true})
	_, err = store.AddAllowlist(ctx, both, eligibility.Allowlist{Persons: []string{"bob"}})
	require.NoError(t, err)
	_, err = gate.Check(ctx, both, 3, token(7022, 3, "carol"))
	require.ErrorIs(t, err, seckill.ErrNotEligible, "carol is not on the list")
	_, err = gate.Check(ctx, both, 4, token(7022, 4, "bob"))
	require.NoError(t, err, "bob is, by his person key")
}
