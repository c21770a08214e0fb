package waitroom

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkSeatSlice is one call of queue_seat.lua: a slice of SeatSlice
// places of a 10,000-entry draw, the longest any one seating call holds
// Redis (ns/op is the slice's round trip, the script's run included).
// Run: go test ./seckill/waitroom -run '^$' -bench SeatSlice
func BenchmarkSeatSlice(b *testing.B) {
	opt, err := redis.ParseURL(os.Getenv("WAITROOM_TEST_REDIS_URL")) // set by TestMain (main_test.go)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	r := New(Config{Redis: rdb, Secret: []byte("bench")})
	ctx := context.Background()
	const n = 10_000
	users := make([]int64, n)
	for i := range users {
		users[i] = int64(1_000_000 + i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		now := time.Now()
		l := Line{VoucherID: int64(900_000 + i), BeginAt: now, EndAt: now.Add(time.Hour), Draw: true}
		b.StartTimer()
		// Every slice of the ranking, timed as one op each below.
		if _, err := r.Seat(ctx, l, users, n/10); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n/SeatSlice))/1e6, "ms/slice")
}
