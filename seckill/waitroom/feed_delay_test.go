package waitroom

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// The place updates' push delay is the age of the latest line move a frame
// tells, however long the line kept changing: with a step every 200 ms and
// sockets whose one-a-second frames fall at different moments, some socket
// is always due a frame, and a delay counted from the oldest move not yet
// pushed would grow for as long as the sale runs. The clocks are made up,
// so nothing here depends on the machine's speed.
func TestFeedPlaceDelayIsTheLatestMovesAge(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	f, err := NewFeed(FeedConfig{Room: New(Config{Secret: []byte("secret")}), Out: &counter{}, Registerer: reg})
	require.NoError(t, err)
	t0 := time.UnixMilli(1_800_000_000_000)
	line := Line{VoucherID: 7, BeginAt: t0.Add(-time.Minute), EndAt: t0.Add(time.Hour), AdmitPerSecond: 100}
	send := func(m wire) {
		m.setLine(line)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		f.Apply(string(b))
	}
	const steps, users = 150, 10 // 30 s of steps
	for i := range steps {
		at := t0.Add(time.Duration(i) * 200 * time.Millisecond)
		head := int64(20 * (i + 1))
		if i < users { // sockets open one a step: their frames fall apart
			send(wire{T: "w", A: at.UnixMilli(), H: head - 20, U: int64(i + 1), K: 100_000 + int64(i), S: StateWaiting})
		}
		send(wire{T: "m", A: at.UnixMilli(), H: head, F: head - 20, X: at.Add(time.Minute).UnixMilli()})
		f.now = func() time.Time { return at.Add(50 * time.Millisecond) }
		f.Flush(t.Context())
	}
	require.Greater(t, f.Stats().Frames, int64(users*20), "every socket got a frame about every second")

	mfs, err := reg.Gather()
	require.NoError(t, err)
	var count uint64
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "seckill_queue_push_delay_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "place" {
				count, sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	require.Equal(t, uint64(f.Stats().Frames), count, "one place delay observed a frame")
	// Each frame went out 50 ms (made up) after the move it tells.
	require.InDelta(t, 0.05, sum/float64(count), 0.001)
}
