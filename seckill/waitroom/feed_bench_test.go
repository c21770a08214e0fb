package waitroom

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	room := New(Config{Secret: []byte("bench")})
	out := &counter{}
	f, err := NewFeed(FeedConfig{Room: room, Out: out})
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

// BenchmarkLineMemory joins 1,000,000 shoppers to one line with the real
// join script (half in the pre-queue, half after begin_at), pipelined, and
// reports Redis's used_memory per million waiting (INFO memory, after minus
// before). The size is fixed: b.N only repeats it. Run:
// go test ./seckill/waitroom -run '^$' -bench LineMemory -benchtime 1x
func BenchmarkLineMemory(b *testing.B) {
	const shoppers, batch = 1_000_000, 2000
	c := benchClient(b)
	room := New(Config{Redis: c, Secret: []byte("bench")})
	ctx := context.Background()
	// EVALSHA in a pipeline cannot fall back to EVAL: load the script first.
	if err := room.join.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		voucher := int64(990_000 + i)
		c.Del(ctx, keysOf(voucher).list()...)
		before := usedMemory(b, c)
		now, err := c.Time(ctx).Result()
		if err != nil {
			b.Fatal(err)
		}
		line := Line{VoucherID: voucher, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour), AdmitPerSecond: 1000, PrequeueSeconds: 7200}
		b.StartTimer()
		join := func(from, to int64) {
			for u := from; u < to; u += batch {
				_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for v := u; v < min(u+batch, to); v++ {
						room.join.Run(ctx, p, keysOf(voucher).list(), "join", v, room.sig.place(voucher, v),
							line.Opens().UnixMilli(), line.BeginAt.UnixMilli(), line.EndAt.UnixMilli(), room.expireAt(line))
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		join(1, shoppers/2+1) // the pre-queue: random places
		// The rest join after begin_at: arrival order.
		line.BeginAt, line.PrequeueSeconds = now.Add(-time.Second), 0
		join(shoppers/2+1, shoppers+1)
		b.StopTimer()
		if n := c.ZCard(ctx, keysOf(voucher).line).Val(); n != shoppers {
			b.Fatalf("line holds %d, want %d", n, shoppers)
		}
		after := usedMemory(b, c)
		b.ReportMetric(float64(after-before)/float64(shoppers), "bytes/shopper")
		b.ReportMetric(float64(after-before)/(1<<20)*1_000_000/float64(shoppers), "MiB/million")
		c.Del(ctx, keysOf(voucher).list()...)
		b.StartTimer()
	}
}

func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// benchClient connects to the redis-server TestMain started.
func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	opt, err := redis.ParseURL(os.Getenv("WAITROOM_TEST_REDIS_URL"))
	if err != nil {
		b.Fatal(err)
	}
	c := redis.NewClient(opt)
	b.Cleanup(func() { _ = c.Close() })
	return c
}
