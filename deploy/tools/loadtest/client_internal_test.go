package loadtest

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestShopperAddr: every shopper of a crowd (consecutive user ids) names an
// address of its own in 10.0.0.0/8, the same in every run, and never the
// range's first or last.
func TestShopperAddr(t *testing.T) {
	private := netip.MustParsePrefix("10.0.0.0/8")
	seen := make(map[string]int64)
	first := DefaultConfig().FirstUserID
	for uid := first; uid < first+5000; uid++ {
		s := shopperAddr(uid)
		a, err := netip.ParseAddr(s)
		require.NoError(t, err, s)
		require.True(t, private.Contains(a), "%d: %s", uid, s)
		other, dup := seen[s]
		require.False(t, dup, "users %d and %d share %s", other, uid, s)
		seen[s] = uid
	}
	require.Equal(t, "10.15.66.65", shopperAddr(1_000_000), "a user's address does not change from run to run")
	const hosts = 1<<24 - 2
	for _, uid := range []int64{0, hosts - 1, hosts, 1 << 40} {
		require.NotContains(t, []string{"10.0.0.0", "10.255.255.255"}, shopperAddr(uid), "%d", uid)
	}
}

// TestRetryAfter reads the header as the contract sends it (seconds), as an
// HTTP date, and anything else as absent.
func TestRetryAfter(t *testing.T) {
	require.Equal(t, 3*time.Second, retryAfter("3"))
	require.Equal(t, time.Second, retryAfter(" 1 "))
	for _, v := range []string{"", "soon", "-5", "1.5"} {
		require.Zero(t, retryAfter(v), "%q", v)
	}
	at := retryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat))
	require.Greater(t, at, 50*time.Second)
	require.LessOrEqual(t, at, time.Minute)
	require.Zero(t, retryAfter(time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)), "a date gone by: no wait")
}
