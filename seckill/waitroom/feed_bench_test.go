package waitroom

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// counter counts frames, as a gateway's hub would write them.
type counter struct{ frames, bytes int64 }

func (c *counter) Connected(int64) bool { return true }
func (c *counter) Deliver(_ int64, f []byte) bool {
	c.frames++
	c.bytes += int64(len(f))
	return true
}

// BenchmarkFeedTick is one admission step of a line of 100,000 shoppers,
// all connected to this gateway, one second after the last: what it costs
// the fleet (messages on the Redis channel: one) and this gateway (frames:
// one per shopper whose place changed, the shoppers admitted by the step
// included; CPU per tick). Run: go test ./seckill/waitroom -run '^$' -bench FeedTick
func BenchmarkFeedTick(b *testing.B) {
	const waiting, perStep = 100_000, 500
	room := New(nil, []byte("bench"))
	out := &counter{}
	f, err := room.NewFeed(out, FeedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	begin := time.Now().Add(-time.Minute)
	line := Line{VoucherID: 1, BeginAt: begin, EndAt: begin.Add(time.Hour), AdmitPerSecond: perStep}
	clock := begin.Add(time.Second)
	f.now = func() time.Time { return clock }
	msg := func(m wire) string {
		m.setLine(line)
		p, _ := json.Marshal(m)
		return string(p)
	}
	for u := int64(0); u < waiting; u++ {
		f.Apply(msg(wire{T: "w", A: clock.UnixMilli(), U: u + 1, K: u, S: StateWaiting}))
	}
	ctx := context.Background()
	var head, msgs, published int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if head+perStep > waiting {
			b.StopTimer()
			head = 0
			for u := int64(0); u < waiting; u++ {
				f.Apply(msg(wire{T: "w", A: clock.UnixMilli(), U: u + 1, K: u, S: StateWaiting}))
			}
			b.StartTimer()
		}
		clock = clock.Add(time.Second)
		m := msg(wire{T: "m", A: clock.UnixMilli(), H: head + perStep, F: head, X: clock.Add(time.Minute).UnixMilli()})
		published += int64(len(m))
		msgs++
		f.Apply(m)
		f.Flush(ctx)
		head += perStep
	}
	b.ReportMetric(float64(msgs)/float64(b.N), "redis-msgs/tick")
	b.ReportMetric(float64(published)/float64(b.N), "redis-bytes/tick")
	b.ReportMetric(float64(out.frames)/float64(b.N), "frames/tick")
	b.ReportMetric(float64(out.bytes)/float64(out.frames), "bytes/frame")
}
