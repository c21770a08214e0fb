package draw_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
)

// countingSeed is the seed 00 01 02 ... 1f, whose SHA-256 is a published
// test vector, and whose tickets openssl computed:
//
//	printf '%s' 42:7 | openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f
func countingSeed() draw.Seed {
	var s draw.Seed
	for i := range s {
		s[i] = byte(i)
	}
	return s
}

func TestKnownVectors(t *testing.T) {
	s := countingSeed()
	assert.Equal(t, "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd", s.Commitment())
	assert.Equal(t, "04ca91470b70fb2b54bcf0103b198ca1aad642a0de8118819cd2b2f86b9484b8", draw.TicketOf(s, 42, 7).String())
	back, err := draw.ParseSeed(s.String())
	require.NoError(t, err)
	assert.Equal(t, s, back)
	for _, bad := range []string{"", "00", s.String() + "00", "zz" + s.String()[2:]} {
		_, err := draw.ParseSeed(bad)
		assert.Error(t, err, bad)
	}
}

func TestWinnersFor(t *testing.T) {
	for _, c := range []struct{ stock, limit, want int64 }{
		{0, 1, 0}, {-3, 1, 0}, {10, 1, 10}, {10, 2, 5}, {10, 3, 4}, {1, 5, 1}, {7, 0, 7},
	} {
		assert.Equal(t, c.want, draw.WinnersFor(c.stock, c.limit), "stock %d limit %d", c.stock, c.limit)
	}
}

// TestTenThousandEntries draws 2,000 units (limit 2: 1,000 winners) among
// 10,000 entries and checks the result against tickets computed apart from
// the package, from the seed alone, as a shopper or an auditor would.
func TestTenThousandEntries(t *testing.T) {
	seed, err := draw.NewSeed(rand.NewChaCha8([32]byte{7}))
	require.NoError(t, err)
	const voucher, entries = 9001, 10_000
	users := make([]int64, entries)
	for i := range users {
		users[i] = int64(1_000_000 + 37*i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
	d := draw.Rank(seed, voucher, append(users, users[:10]...), 2000, 2) // ten entered twice: one entry each
	require.Len(t, d.Ranked, entries)
	require.Equal(t, 1000, d.Winners)

	// By hand: HMAC of "voucher:user", hex, sorted as text.
	type kv struct {
		key  string
		user int64
	}
	want := make([]kv, entries)
	for i, u := range users {
		m := hmac.New(sha256.New, seed[:])
		fmt.Fprintf(m, "%d:%d", voucher, u)
		want[i] = kv{hex.EncodeToString(m.Sum(nil)), u}
	}
	slices.SortFunc(want, func(a, b kv) int {
		if a.key < b.key {
			return -1
		}
		return 1
	})
	for i, e := range d.Ranked {
		require.Equal(t, want[i].user, e.UserID, "rank %d", i)
		require.Equal(t, want[i].key, e.Ticket.String(), "rank %d", i)
	}
	cut, ok := d.Cutoff()
	require.True(t, ok)
	assert.Equal(t, want[999].key, cut.String())
	won := 0
	for i, e := range d.Ranked {
		// A shopper's check: won exactly when the ticket is at most the cut-off.
		assert.Equal(t, e.Ticket.String() <= cut.String(), d.ResultAt(i) == draw.Won)
		if d.ResultAt(i) == draw.Won {
			won++
		}
	}
	assert.Equal(t, 1000, won)
	assert.Equal(t, want[0].user, d.Users()[0])
}

func TestFewerEntriesThanStock(t *testing.T) {
	d := draw.Rank(countingSeed(), 1, []int64{5, 6, 7}, 100, 1)
	assert.Equal(t, 3, d.Winners)
	d = draw.Rank(countingSeed(), 1, nil, 100, 1)
	_, ok := d.Cutoff()
	assert.False(t, ok)
}

// TestRanksUniform checks that a rank owes nothing to the order of entry or
// to the user id: 100,000 entries with consecutive ids, split into ten
// groups by id (the order they would have entered), land in the ten bands
// of rank evenly. Pearson's chi-square of the 10 x 10 table (81 degrees of
// freedom) must stay below 124.8, its 0.1% critical value. The seed is
// fixed, so the test gives the same answer every run.
func TestRanksUniform(t *testing.T) {
	seed, err := draw.NewSeed(rand.NewChaCha8([32]byte{42}))
	require.NoError(t, err)
	const n, groups = 100_000, 10
	users := make([]int64, n)
	for i := range users {
		users[i] = int64(i + 1)
	}
	d := draw.Rank(seed, 77, users, 10_000, 1)
	var table [groups][groups]float64
	for rank, e := range d.Ranked {
		table[(e.UserID-1)*groups/n][rank*groups/n]++
	}
	expected := float64(n) / groups / groups
	chi := 0.0
	for _, row := range table {
		for _, got := range row {
			chi += (got - expected) * (got - expected) / expected
		}
	}
	t.Logf("chi-square %.1f over 81 degrees of freedom", chi)
	assert.Less(t, chi, 124.8)
	// And it can fail: ranking by user id instead gives the largest chi-square there is.
	var sorted [groups][groups]float64
	for rank := range n {
		sorted[rank*groups/n][rank*groups/n]++
	}
	worst := 0.0
	for _, row := range sorted {
		for _, got := range row {
			worst += (got - expected) * (got - expected) / expected
		}
	}
	assert.Greater(t, worst, 124.8)
}
