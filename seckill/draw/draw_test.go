package draw_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/draw"
)

// countingRandomness is the randomness 00 01 02 ... 1f, whose tickets
// openssl computed:
//
//	printf '%s' 42:e1 | openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f
func countingRandomness() draw.Randomness {
	var r draw.Randomness
	for i := range r {
		r[i] = byte(i)
	}
	return r
}

func TestKnownVectors(t *testing.T) {
	r := countingRandomness()
	assert.Equal(t, "53faddaba5f4fb0178ff1196f2f229d752ef656d6656947aad85c95094144d3e", draw.TicketOf(r, 42, "e1").String())
	// printf 'a\nb\n' | sha256sum
	assert.Equal(t, "911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2", draw.EntriesHash([]string{"b", "a"}))
	assert.Equal(t, "a\nb\n", string(draw.EntryList([]string{"b", "a"})))
	sig := []byte("a signature")
	sum := sha256.Sum256(sig)
	assert.Equal(t, hex.EncodeToString(sum[:]), draw.RandomnessOf(sig).String(), "randomness is SHA-256 of the signature")
	tk, err := draw.ParseTicket(draw.TicketOf(r, 42, "e1").String())
	require.NoError(t, err)
	assert.Equal(t, draw.TicketOf(r, 42, "e1"), tk)
	for _, bad := range []string{"", "00", "zz"} {
		_, err := draw.ParseTicket(bad)
		assert.Error(t, err, bad)
	}
	a, err := draw.NewEntryID(nil)
	require.NoError(t, err)
	b, err := draw.NewEntryID(nil)
	require.NoError(t, err)
	assert.Len(t, a, 32)
	assert.NotEqual(t, a, b)
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
// the package, from the randomness alone, as a shopper or an auditor would.
func TestTenThousandEntries(t *testing.T) {
	var r draw.Randomness
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range r {
		r[i] = byte(rng.Uint32())
	}
	const voucher, n = 9001, 10_000
	entries := make([]draw.Entry, n)
	for i := range entries {
		entries[i] = draw.Entry{EntryID: fmt.Sprintf("%032x", rng.Uint64()), UserID: int64(1_000_000 + 37*i)}
	}
	d := draw.Rank(r, voucher, entries, 2000, 2)
	require.Len(t, d.Ranked, n)
	require.Equal(t, 1000, d.Winners)

	type kv struct{ key, id string }
	want := make([]kv, n)
	for i, e := range entries {
		m := hmac.New(sha256.New, r[:])
		m.Write([]byte(strconv.Itoa(voucher) + ":" + e.EntryID))
		want[i] = kv{hex.EncodeToString(m.Sum(nil)), e.EntryID}
	}
	slices.SortFunc(want, func(a, b kv) int {
		if a.key < b.key {
			return -1
		}
		return 1
	})
	for i, e := range d.Ranked {
		require.Equal(t, want[i].id, e.EntryID, "rank %d", i)
		require.Equal(t, want[i].key, e.Ticket.String(), "rank %d", i)
	}
	cut, ok := d.Cutoff()
	require.True(t, ok)
	assert.Equal(t, want[999].key, cut.String())
	for i, e := range d.Ranked {
		assert.Equal(t, e.Ticket.String() <= cut.String(), d.ResultAt(i) == draw.Won)
	}
}

func TestFewerEntriesThanStock(t *testing.T) {
	d := draw.Rank(countingRandomness(), 1, []draw.Entry{{EntryID: "a", UserID: 5}, {EntryID: "b", UserID: 6}}, 100, 1)
	assert.Equal(t, 2, d.Winners)
	d = draw.Rank(countingRandomness(), 1, nil, 100, 1)
	_, ok := d.Cutoff()
	assert.False(t, ok)
}

// TestRanksUniform checks that a rank owes nothing to the order of entry:
// 100,000 entries split into ten groups in the order they came land in the
// ten bands of rank evenly. Pearson's chi-square of the 10 x 10 table (81
// degrees of freedom) must stay below 124.8, its 0.1% critical value. The
// randomness is fixed, so the test gives the same answer every run.
func TestRanksUniform(t *testing.T) {
	var r draw.Randomness
	r[0] = 42
	const n, groups = 100_000, 10
	entries := make([]draw.Entry, n)
	for i := range entries {
		entries[i] = draw.Entry{EntryID: fmt.Sprintf("%032x", i), UserID: int64(i)}
	}
	d := draw.Rank(r, 77, entries, 10_000, 1)
	var table [groups][groups]float64
	for rank, e := range d.Ranked {
		table[e.UserID*groups/n][rank*groups/n]++
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
}
