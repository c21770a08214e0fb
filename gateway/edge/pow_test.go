package edge_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// zeroBits counts the leading zero bits of SHA-256(salt + nonce), as a
// client checks its own answer.
func zeroBits(salt, nonce string) int {
	sum := sha256.Sum256([]byte(salt + nonce))
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

func powAttempt(voucherID, userID int64, id, nonce string) *pipe.Attempt {
	a := attempt(voucherID, userID)
	a.ChallengeID, a.ChallengeAnswer = id, nonce
	return a
}

// A challenge is answered once, on any instance, for the voucher it was
// issued for; a wrong or malformed answer burns it, and an expired one is
// refused.
func TestChallengeSingleUseSharedByInstances(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	cfg := edge.Config{PoW: edge.PoWConfig{BaseBits: 8, MaxBits: 12, TTL: 400 * time.Millisecond}}
	a, _ := newEdge(t, rdb, cfg)
	b, _ := newEdge(t, rdb, cfg)
	ctx := context.Background()
	const vid = 9101

	ch, err := a.Challenges.Issue(ctx, vid, "10.1.0.1")
	require.NoError(t, err)
	require.Equal(t, "pow", ch.Kind)
	require.Equal(t, "SHA-256", ch.Algorithm)
	require.Equal(t, 8, ch.DifficultyBits)
	require.True(t, ch.ExpiresAt.After(time.Now().Add(-time.Second)))
	nonce := edge.Solve(ch.Salt, ch.DifficultyBits)
	require.GreaterOrEqual(t, zeroBits(ch.Salt, nonce), 8)

	require.NoError(t, b.Challenges.Precheck(powAttempt(vid, 1, ch.ChallengeID, nonce)))
	require.NoError(t, b.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, nonce), false))
	require.ErrorIs(t, a.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, nonce), false), apperr.ErrChallengeInvalid)

	// Issued for another voucher: refused, and burned.
	ch, err = a.Challenges.Issue(ctx, vid, "10.1.0.1")
	require.NoError(t, err)
	nonce = edge.Solve(ch.Salt, ch.DifficultyBits)
	require.ErrorIs(t, b.Challenges.Check(ctx, powAttempt(vid+1, 1, ch.ChallengeID, nonce), false), apperr.ErrChallengeInvalid)
	require.ErrorIs(t, b.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, nonce), false), apperr.ErrChallengeInvalid)

	// A malformed answer burns it too.
	ch, err = a.Challenges.Issue(ctx, vid, "10.1.0.1")
	require.NoError(t, err)
	nonce = edge.Solve(ch.Salt, ch.DifficultyBits)
	require.ErrorIs(t, b.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, " "+nonce), false), apperr.ErrChallengeInvalid)
	require.ErrorIs(t, b.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, nonce), false), apperr.ErrChallengeInvalid)

	// Expired.
	ch, err = a.Challenges.Issue(ctx, vid, "10.1.0.1")
	require.NoError(t, err)
	nonce = edge.Solve(ch.Salt, ch.DifficultyBits)
	time.Sleep(500 * time.Millisecond)
	require.ErrorIs(t, b.Challenges.Check(ctx, powAttempt(vid, 1, ch.ChallengeID, nonce), false), apperr.ErrChallengeInvalid)

	// Shapes refused before Redis is asked, and never a match.
	for _, c := range [][2]string{
		{"", ""}, {"", "1"}, {ch.ChallengeID, ""}, {strings.Repeat("0", 32), "1"},
		{strings.ToUpper(ch.ChallengeID), nonce}, {ch.ChallengeID + "0", nonce},
		{ch.ChallengeID, "-1"}, {ch.ChallengeID, "1e3"}, {ch.ChallengeID, strings.Repeat("1", 21)},
	} {
		require.ErrorIs(t, a.Challenges.Precheck(powAttempt(vid, 1, c[0], c[1])), apperr.ErrChallengeInvalid, "%q", c)
		require.ErrorIs(t, a.Challenges.Check(ctx, powAttempt(vid, 1, c[0], c[1]), false), apperr.ErrChallengeInvalid, "%q", c)
	}
}

// Many buyers racing with one solved challenge: exactly one spends it.
func TestChallengeSpentOnceUnderRace(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{PoW: edge.PoWConfig{BaseBits: 8}})
	ctx := context.Background()
	const vid = 9102
	for round := 0; round < 5; round++ {
		ch, err := e.Challenges.Issue(ctx, vid, "10.1.0.2")
		require.NoError(t, err)
		nonce := edge.Solve(ch.Salt, ch.DifficultyBits)
		var ok, refused atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 32; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := e.Challenges.Check(ctx, powAttempt(vid, int64(g), ch.ChallengeID, nonce), false)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, apperr.ErrChallengeInvalid):
					refused.Add(1)
				}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, ok.Load())
		require.EqualValues(t, 31, refused.Load())
	}
}

// The difficulty rises by one bit per doubling of one address's recent
// challenges above its free share, and no further than the cap; another
// address asking for the same voucher keeps the base until the voucher's
// own count doubles past its free share.
func TestChallengeDifficultyFollowsLoad(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{PoW: edge.PoWConfig{
		BaseBits: 8, MaxBits: 11, AddressFree: 4, VoucherFree: 40, Window: time.Hour,
	}})
	ctx := context.Background()
	const vid = 9103
	var got []int
	for i := 1; i <= 40; i++ {
		ch, err := e.Challenges.Issue(ctx, vid, "10.1.0.3")
		require.NoError(t, err)
		got = append(got, ch.DifficultyBits)
	}
	// Counts 1-4: base; 5-8: +1; 9-16: +2; 17 on: +3, the cap; the
	// voucher's count (40) reaches its free share on the last one.
	want := make([]int, 0, 40)
	for i := 1; i <= 40; i++ {
		switch {
		case i <= 4:
			want = append(want, 8)
		case i <= 8:
			want = append(want, 9)
		case i <= 16:
			want = append(want, 10)
		default:
			want = append(want, 11)
		}
	}
	require.Equal(t, want, got)

	// Another address: its own count is 1, the voucher's 41 (one doubling
	// of its free 40).
	ch, err := e.Challenges.Issue(ctx, vid, "10.1.0.4")
	require.NoError(t, err)
	require.Equal(t, 9, ch.DifficultyBits)
	// Another voucher from a fresh address: the base.
	ch, err = e.Challenges.Issue(ctx, vid+1, "10.1.0.5")
	require.NoError(t, err)
	require.Equal(t, 8, ch.DifficultyBits)
}

// The rule itself, at the edges of each doubling.
func TestChallengeDifficultyRule(t *testing.T) {
	t.Parallel()
	c := edge.PoWConfig{BaseBits: 14, MaxBits: 20, AddressFree: 20, VoucherFree: 10000}
	for _, tc := range []struct {
		addr, vouch int64
		want        int
	}{
		{0, 0, 14}, {20, 10000, 14}, {21, 0, 15}, {40, 0, 15}, {41, 0, 16}, {80, 0, 16}, {81, 0, 17},
		{0, 10001, 15}, {0, 20001, 16}, {41, 20001, 18}, {1 << 20, 0, 20}, {1 << 40, 1 << 40, 20},
	} {
		require.Equal(t, tc.want, c.Difficulty(tc.addr, tc.vouch), "%+v", tc)
	}
}

// In the buy: a pow voucher refuses an answer that is no solution at the
// base difficulty before any limit is charged (a flood of them leaves the
// global budget whole), takes a solved one once, and other vouchers ask
// for nothing.
func TestChallengeStepInTheBuy(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{GlobalRate: 1, GlobalBurst: 1, PoW: edge.PoWConfig{BaseBits: 10}})
	var sold atomic.Int64
	ctx := context.Background()
	const vid = 9104
	guarded := chain(e.Steps(), seckill.Voucher{ID: vid, ProofOfWork: true}, accept(&sold))

	ch, err := e.Challenges.Issue(ctx, vid, "10.1.0.6")
	require.NoError(t, err)
	for n, sent := 0, 0; sent < 50; n++ {
		nonce := strconv.Itoa(n)
		if zeroBits(ch.Salt, nonce) >= 10 {
			continue // a lucky nonce would pass; the point is the others
		}
		sent++
		_, err := guarded(ctx, powAttempt(vid, 7, ch.ChallengeID, nonce))
		require.ErrorIs(t, err, apperr.ErrChallengeInvalid)
	}
	_, err = guarded(ctx, attempt(vid, 7))
	require.ErrorIs(t, err, apperr.ErrChallengeInvalid)

	nonce := edge.Solve(ch.Salt, ch.DifficultyBits)
	_, err = guarded(ctx, powAttempt(vid, 7, ch.ChallengeID, nonce))
	require.NoError(t, err, "the global budget of 1 must still be whole")
	require.EqualValues(t, 1, sold.Load())

	free := chain(e.Steps(), seckill.Voucher{ID: vid + 1}, accept(&sold))
	time.Sleep(1100 * time.Millisecond) // the global budget of 1 a second refills
	_, err = free(ctx, attempt(vid+1, 7))
	require.NoError(t, err)
	require.EqualValues(t, 2, sold.Load())
}
