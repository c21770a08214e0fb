package loadtest

import (
	"net/netip"
	"testing"

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
