package edge

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAddrLimitPerKey(t *testing.T) {
	t.Parallel()
	l := newAddrLimit("test", 10, 3, nil) // one every 100 ms, three at once
	t0 := time.Now()
	for i := range 3 {
		require.True(t, l.decide("9.9.9.9", t0).allowed, "burst request %d", i)
	}
	r := l.decide("9.9.9.9", t0)
	require.False(t, r.allowed, "the fourth at once is over the burst")
	require.Equal(t, 100*time.Millisecond, r.retryAfter)
	require.True(t, l.decide("2001:db8::/56", t0).allowed, "another key has its own budget")
	require.True(t, l.decide("9.9.9.9", t0.Add(100*time.Millisecond)).allowed, "Retry-After honoured is in time")
	require.False(t, l.decide("9.9.9.9", t0.Add(100*time.Millisecond)).allowed)

	// Under a steady flood one key gets burst + rate·t, never more.
	allowed := 0
	for d := time.Duration(0); d < 5*time.Second; d += time.Millisecond {
		if l.decide("flood", t0.Add(d)).allowed {
			allowed++
		}
	}
	require.InDelta(t, 3+10*5, allowed, 1)
}

// The table holds only the keys that are not fully rested, and forgetting a
// rested key changes no decision.
func TestAddrLimitSweepKeepsOnlyBusyKeys(t *testing.T) {
	t.Parallel()
	l := newAddrLimit("test", 10, 3, nil)
	t0 := time.Now()
	for i := range 1000 {
		l.decide(string(rune('a'+i%26))+string(rune(i)), t0)
	}
	for range 3 {
		l.decide("busy", t0.Add(time.Second))
	}
	require.Equal(t, 1001, l.sweep(t0), "nothing is rested at once")
	require.Equal(t, 1, l.sweep(t0.Add(time.Second+10*time.Millisecond)), "only the busy key is kept")
	require.False(t, l.decide("busy", t0.Add(time.Second+10*time.Millisecond)).allowed, "the busy key kept its debt")
	require.Equal(t, 0, l.sweep(t0.Add(2*time.Second)))
	for range 3 {
		require.True(t, l.decide("busy", t0.Add(2*time.Second)).allowed, "a forgotten key starts rested")
	}
}
