package redisstock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
)

// BenchmarkReserve is the buy path's Redis call: reserve.lua by EVALSHA,
// parallel, every call a new user, never sold out. It runs 25 goroutines per
// GOMAXPROCS (50 on two cores) to load Redis like redis-benchmark's default
// 50 clients, the ceiling to compare with.
func BenchmarkReserve(b *testing.B) {
	ctx := context.Background()
	bu := setup(b)
	now := serverNow(b, bu.rdb)
	v := voucher(seckill.MaxStock, 1, now.Add(-time.Minute), now.Add(time.Hour))
	require.NoError(b, bu.store.Warm(ctx, v))
	b.Cleanup(func() { _ = bu.store.Unwarm(context.Background(), v.ID) })
	b.ReportAllocs()
	b.SetParallelism(25)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bu.store.Reserve(ctx, res(v, next(), 1, "")); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
