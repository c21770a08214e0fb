package orderid

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		node int64
		ok   bool
	}{
		{-1, false}, {0, true}, {MaxNode, true}, {MaxNode + 1, false},
	} {
		g, err := New(tc.node)
		if !tc.ok {
			require.ErrorContains(t, err, "outside 0..", "node %d", tc.node)
			continue
		}
		require.NoError(t, err, "node %d", tc.node)
		require.Equal(t, tc.node, g.Node())
	}
}

func TestIDsAreUniqueUnderConcurrency(t *testing.T) {
	t.Parallel()
	g, err := New(7)
	require.NoError(t, err)
	const workers, each = 8, 50_000
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ids := make([]int64, each)
			for i := range ids {
				ids[i] = g.Next()
			}
			got[w] = ids
		})
	}
	wg.Wait()
	seen := make(map[int64]bool, workers*each)
	for _, ids := range got {
		for i, id := range ids {
			require.False(t, seen[id], "duplicate id %d", id)
			seen[id] = true
			if i > 0 {
				require.Greater(t, id, ids[i-1], "ids of one goroutine grow")
			}
		}
	}
}

func TestIDsAreMonotonicAndDecode(t *testing.T) {
	t.Parallel()
	g, err := New(513)
	require.NoError(t, err)
	before := time.Now().Truncate(time.Millisecond)
	prev := g.Next()
	for range 100_000 {
		id := g.Next()
		require.Greater(t, id, prev)
		prev = id
	}
	at, node, seq := Parts(prev)
	require.Equal(t, int64(513), node)
	require.GreaterOrEqual(t, seq, int64(0))
	require.False(t, at.Before(before))
	require.WithinDuration(t, time.Now(), at, time.Second)
	require.Positive(t, prev)
}

// clock is a fake millisecond clock.
type clock struct{ ms atomic.Int64 }

func (c *clock) now() int64 { return c.ms.Load() }

func TestClockGoingBackwardsNeverRepeats(t *testing.T) {
	t.Parallel()
	c := &clock{}
	c.ms.Store(1_000)
	g, err := newWithClock(1, c.now)
	require.NoError(t, err)
	a := g.Next()
	c.ms.Store(400) // NTP stepped the clock back
	b := g.Next()
	require.Greater(t, b, a)
	at, _, _ := Parts(b)
	require.Equal(t, int64(1_000), at.UnixMilli()-EpochMs, "keeps the last millisecond")

	// While the clock is behind, a used-up sequence borrows the next
	// millisecond instead of waiting for the clock to catch up.
	prev := b
	for range 3 * (1 << SeqBits) {
		id := g.Next()
		require.Greater(t, id, prev)
		prev = id
	}
	at, _, _ = Parts(prev)
	require.Equal(t, int64(1_003), at.UnixMilli()-EpochMs)

	c.ms.Store(5_000)
	at, _, seq := Parts(g.Next())
	require.Equal(t, int64(5_000), at.UnixMilli()-EpochMs, "follows the clock again")
	require.Zero(t, seq)
}

func TestSequenceOverflowWaitsForTheNextMillisecond(t *testing.T) {
	t.Parallel()
	c := &clock{}
	c.ms.Store(2_000)
	g, err := newWithClock(1, c.now)
	require.NoError(t, err)
	for range 1 << SeqBits {
		g.Next()
	}
	done := make(chan int64)
	go func() { done <- g.Next() }()
	select {
	case <-done:
		t.Fatal("Next did not wait for the next millisecond")
	case <-time.After(20 * time.Millisecond):
	}
	c.ms.Store(2_001)
	id := <-done
	at, _, seq := Parts(id)
	require.Equal(t, int64(2_001), at.UnixMilli()-EpochMs)
	require.Zero(t, seq)
}

func BenchmarkOrderID(b *testing.B) {
	g, err := New(1)
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g.Next()
		}
	})
}
