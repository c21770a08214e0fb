package loadtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPushDelays checks the push-delay bookkeeping on made-up arrival times:
// which message accounts for which buy, what counts as 0 and as missed.
func TestPushDelays(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	msg := func(ms int, id string, left int64) stockSeen {
		return stockSeen{at: at(ms), voucherID: id, stockLeft: left}
	}
	// Stock 3; three buys answered at 10, 20 and 30 ms.
	buys := []sold{{at: at(10), units: 1}, {at: at(20), units: 2}, {at: at(30), units: 3}}
	for _, tc := range []struct {
		name    string
		seen    []stockSeen
		delays  []time.Duration
		missed  int
		soldOut []time.Duration // from the third 202
	}{
		{"one push per buy", []stockSeen{msg(15, "v", 2), msg(22, "v", 1), msg(40, "v", 0)},
			[]time.Duration{5 * time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond}, 0, []time.Duration{10 * time.Millisecond}},
		{"a throttled push covers two buys", []stockSeen{msg(25, "v", 1), msg(50, "v", 0)},
			[]time.Duration{15 * time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}, 0, []time.Duration{20 * time.Millisecond}},
		{"a push ahead of the tool's 202 counts as 0", []stockSeen{msg(5, "v", 2), msg(6, "v", 0)},
			[]time.Duration{0, 0, 0}, 0, []time.Duration{0}},
		{"other vouchers and stale stock don't count", []stockSeen{msg(12, "w", 0), msg(13, "v", 3), msg(14, "v", 2)},
			[]time.Duration{4 * time.Millisecond}, 2, nil},
		{"no pushes", nil, nil, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			socks := []*socket{{seen: tc.seen}}
			delays, missed := pushDelays(socks, "v", 3, buys)
			require.Equal(t, tc.delays, delays)
			require.Equal(t, tc.missed, missed)
			so, seen := sellOutDelays(socks, "v", at(30))
			require.Equal(t, tc.soldOut, so)
			require.Equal(t, len(tc.soldOut), seen)
		})
	}
}

// TestDatabaseURL checks where the crowd finds PostgreSQL: the explicit URL
// first, else a running dev cluster's postmaster.pid.
func TestDatabaseURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidDir := filepath.Join(dir, "postgres", "data")
	require.NoError(t, os.MkdirAll(pidDir, 0o700))
	pid := "4242\n" + pidDir + "\n1764567890\n54321\n" + filepath.Join(dir, "postgres") + "\n127.0.0.1\n  1234  5678\nready   \n"
	require.NoError(t, os.WriteFile(filepath.Join(pidDir, "postmaster.pid"), []byte(pid), 0o600))

	for _, tc := range []struct {
		name, explicit, dataDir, want, err string
	}{
		{"explicit wins", "postgres://app@db:5432/shop", dir, "postgres://app@db:5432/shop", ""},
		{"dev cluster", "", dir, "postgres://postgres@127.0.0.1:54321/seckill?sslmode=disable", ""},
		{"no cluster there", "", t.TempDir(), "", "is `seckill dev` running"},
		{"nothing at all", "", "", "", "set SECKILL_DATABASE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, source, err := databaseURL(tc.explicit, tc.dataDir)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.NotEmpty(t, source)
		})
	}
}

// TestSourceAddrs checks that loopback targets get distinct loopback source
// addresses and other targets the default one.
func TestSourceAddrs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		base   string
		spread bool
		on     bool
	}{
		{"http://127.0.0.1:8080", true, true},
		{"http://127.0.0.1:8080", false, false},
		{"http://localhost:8080", true, false},
		{"http://[::1]:8080", true, false},
		{"http://10.0.0.5:8080", true, false},
	} {
		s := newSourceAddrs(tc.base, tc.spread)
		require.Equal(t, tc.on, s.on, tc.base)
		if !tc.on {
			require.Nil(t, s.take())
			continue
		}
		seen := map[string]bool{}
		for range 70_000 {
			a := s.take()
			require.True(t, a.IP.IsLoopback(), a.IP)
			ip4 := a.IP.To4()
			require.NotContains(t, []byte{0, 1, 255}, ip4[3], a.IP)
			require.False(t, seen[a.IP.String()], "%s given twice", a.IP)
			seen[a.IP.String()] = true
		}
	}
}
