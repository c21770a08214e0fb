package waitroom

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
)

// frames keeps the queue frames it is given.
type frames struct{ got []api.Queue }

func (f *frames) Connected(int64) bool { return true }
func (f *frames) Deliver(_ int64, b []byte) bool {
	var fr api.Frame
	if json.Unmarshal(b, &fr) == nil && fr.Queue != nil {
		f.got = append(f.got, *fr.Queue)
	}
	return true
}

// The waits a feed pushes use the rate of the newest step: when the rate in
// force falls (an adaptive room slowing down, an operator's PATCH), the
// next frame quotes the slower wait, not the rate the line was first seen
// at. The clocks are made up.
func TestFeedPushesTheWaitAtTheRateInForce(t *testing.T) {
	t.Parallel()
	out := &frames{}
	f, err := NewFeed(FeedConfig{Room: New(Config{Secret: []byte("secret")}), Out: out})
	require.NoError(t, err)
	t0 := time.UnixMilli(1_800_000_000_000)
	line := Line{VoucherID: 8, BeginAt: t0.Add(-time.Minute), EndAt: t0.Add(time.Hour), AdmitPerSecond: 100}
	send := func(m wire, rate int64) {
		l := line
		l.AdmitPerSecond = rate
		m.setLine(l)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		f.Apply(string(b))
	}
	// Rank 1000: a move to head 1 puts it at 1000, one to head 2 at 999.
	send(wire{T: "w", A: t0.UnixMilli(), H: 0, U: 1, K: 1000, S: StateWaiting}, 100)
	step := func(at time.Time, head, rate int64) api.Queue {
		t.Helper()
		send(wire{T: "m", A: at.UnixMilli(), H: head, F: head - 1, X: at.Add(time.Minute).UnixMilli()}, rate)
		f.now = func() time.Time { return at }
		f.Flush(t.Context())
		require.NotEmpty(t, out.got)
		return out.got[len(out.got)-1]
	}
	q := step(t0.Add(time.Second), 1, 100)
	require.EqualValues(t, 1000, q.Position)
	require.EqualValues(t, 10, q.ETASeconds, "1000 at 100 a second")
	q = step(t0.Add(3*time.Second), 2, 20)
	require.EqualValues(t, 999, q.Position)
	require.EqualValues(t, 50, q.ETASeconds, "999 at 20 a second, the rate in force")
}
