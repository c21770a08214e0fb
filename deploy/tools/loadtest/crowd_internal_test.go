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

// TestAdmissionRate checks the measure of the room's admission rate on
// made-up samples: the slope is taken while the line is long and before
// 80% of the stock is admitted, and checked only over 10 s and 1,000
// admissions.
func TestAdmissionRate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	line := func(rate float64, seconds int, stock int64) []admitSample {
		var s []admitSample
		for ms := 0; ms <= seconds*1000; ms += 250 {
			admitted := int64(rate * float64(ms) / 1000)
			s = append(s, admitSample{at: t0.Add(time.Duration(ms) * time.Millisecond), admitted: min(admitted, stock), waiting: 100_000 - admitted})
		}
		return s
	}

	short := admissionRate(line(91, 3, 250), 250, 100)
	require.False(t, short.checked, "2.5 s and 200 admissions are a figure")
	require.InDelta(t, 91, short.perSecond, 1)
	require.Contains(t, short.note, "needs at least 10s and 1000")

	long := admissionRate(line(1000, 30, 100_000), 100_000, 1000)
	require.True(t, long.checked)
	require.InDelta(t, 1000, long.perSecond, 1)
	require.InDelta(t, 1, long.ratio, 0.001)
	require.Empty(t, long.note)

	// Past 80% of the stock the samples are left out: the slope stays
	// that of the long line, not of the bounded end.
	ended := line(1000, 30, 12_000)
	for i := range ended {
		if ended[i].admitted > 9_600 {
			ended[i].admitted = 9_600 + (ended[i].admitted-9_600)/10
		}
	}
	ended = append(ended, admitSample{at: t0.Add(40 * time.Second), admitted: 12_000, waiting: 0})
	cut := admissionRate(ended, 12_000, 1000)
	require.InDelta(t, 1000, cut.perSecond, 30)
	require.Less(t, cut.window, 10*time.Second, "the samples past 80%% are out")
	require.False(t, cut.checked)

	none := admissionRate(nil, 100, 10)
	require.False(t, none.checked)
	require.Zero(t, none.perSecond)
}

// TestFrameBunch checks the measure of frames arriving faster than one a
// second on made-up arrival times: delivery jitter between frames handed a
// second apart stays within the jitter; frames at each 200 ms flush bunch
// by seconds.
func TestFrameBunch(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	frames := func(ms ...int) []roomFrame {
		var f []roomFrame
		for _, m := range ms {
			f = append(f, roomFrame{at: t0.Add(time.Duration(m) * time.Millisecond)})
		}
		return f
	}
	require.Zero(t, frameBunch(nil, time.Second))
	require.Zero(t, frameBunch(frames(0, 1000, 2500, 3500), time.Second))
	// Handed at 0, 1000, 2000, 3000; the second delivered 250 ms late.
	require.Equal(t, 250*time.Millisecond, frameBunch(frames(0, 1250, 2000, 3000), time.Second))
	// Handed at 0, 1000, 2000, 3000; the first delivered 400 ms late.
	require.Equal(t, 400*time.Millisecond, frameBunch(frames(400, 1000, 2000, 3000), time.Second))
	// Not spaced: one a flush for 2 s.
	every := frames(0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800, 2000)
	require.Equal(t, 8*time.Second, frameBunch(every, time.Second))
	require.Greater(t, frameBunch(every, time.Second), frameJitter)
}
