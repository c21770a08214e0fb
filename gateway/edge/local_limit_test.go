package edge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLocalGCRABurstThenRetryAfter(t *testing.T) {
	t.Parallel()
	l := newLocalGCRA(10, 3) // one every 100 ms, three at once
	t0 := time.Now()
	for i := range 3 {
		require.True(t, l.allow(t0).allowed, "burst request %d", i)
	}
	r := l.allow(t0)
	require.False(t, r.allowed)
	require.Equal(t, 100*time.Millisecond, r.retryAfter)
	require.Equal(t, 300*time.Millisecond, r.resetAfter)

	// A little early is still too early; Retry-After honoured is in time.
	r = l.allow(t0.Add(60 * time.Millisecond))
	require.False(t, r.allowed)
	require.Equal(t, 40*time.Millisecond, r.retryAfter)
	require.True(t, l.allow(t0.Add(100*time.Millisecond)).allowed)
	require.False(t, l.allow(t0.Add(100*time.Millisecond)).allowed)

	// Rested, the whole burst is back, and no more.
	t1 := t0.Add(time.Second)
	for range 3 {
		require.True(t, l.allow(t1).allowed)
	}
	require.False(t, l.allow(t1).allowed)
}

// Under a steady flood GCRA admits burst + rate·t in t seconds, never more.
func TestLocalGCRASteadyRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ rate, burst float64 }{{10, 3}, {1000, 50}, {20_000.0 / 3, 2000.0 / 3}, {7.5, 1}} {
		l := newLocalGCRA(tc.rate, tc.burst)
		t0 := time.Now()
		allowed := 0
		const window = 5 * time.Second
		for d := time.Duration(0); d < window; d += 50 * time.Microsecond {
			if l.allow(t0.Add(d)).allowed {
				allowed++
			}
		}
		want := tc.burst + tc.rate*window.Seconds()
		require.InDelta(t, want, float64(allowed), 1, "rate %v burst %v", tc.rate, tc.burst)
	}
}

// A new share applies from the next request; what was admitted before still
// counts.
func TestLocalGCRAResize(t *testing.T) {
	t.Parallel()
	l := newLocalGCRA(10, 2)
	t0 := time.Now()
	require.True(t, l.allow(t0).allowed)
	require.True(t, l.allow(t0).allowed)
	require.False(t, l.allow(t0).allowed)

	l.set(5, 1) // a second instance joined: half each
	r := l.allow(t0.Add(100 * time.Millisecond))
	require.False(t, r.allowed, "the debt of the old share is kept")
	require.Equal(t, 100*time.Millisecond, r.retryAfter)
	require.True(t, l.allow(t0.Add(200*time.Millisecond)).allowed)
	r = l.allow(t0.Add(200 * time.Millisecond))
	require.False(t, r.allowed)
	require.Equal(t, 200*time.Millisecond, r.retryAfter, "one every 200 ms now")
}
