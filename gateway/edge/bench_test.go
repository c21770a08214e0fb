package edge_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// The cost of the two rate limiters: the same chain with and without them,
// each alone and both, in front of a last step that does nothing. The
// per-user limiter is one Redis script call; the global one is this
// instance's share, in memory.
func BenchmarkLimiters(b *testing.B) {
	rdb := stack.Redis(b)
	e, _ := newEdge(b, rdb, edge.Config{})
	var n atomic.Int64
	with := e.Steps()
	without, global, user := with, with, with
	without.Global, without.User = nil, nil
	global.User = nil
	user.Global = nil
	for _, bc := range []struct {
		name  string
		gates pipe.Steps
	}{{"none", without}, {"global", global}, {"user", user}, {"global+user", with}} {
		buy := chain(bc.gates, seckill.Voucher{ID: 1}, accept(&n))
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(16) // 32 goroutines: throughput, not one round trip's latency
			var user atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				u := user.Add(1)
				for pb.Next() {
					if _, err := buy(context.Background(), attempt(1, u)); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// Sold-out answers from memory against the accepted path (reserve.lua and a
// Kafka write), both through every gate with generous limits.
func BenchmarkBuyPath(b *testing.B) {
	rdb := stack.Redis(b)
	e, _ := newEdge(b, rdb, edge.Config{})
	buyer := realBuyer(b, redisstock.New(redisstock.Config{Redis: rdb}))
	ctx := context.Background()

	b.Run("accepted", func(b *testing.B) {
		v := warm(b, rdb, 10_000_000)
		buy := chain(e.Steps(), v, buyWith(buyer))
		var user atomic.Int64
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := buy(ctx, attempt(v.ID, user.Add(1))); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("sold_out_from_memory", func(b *testing.B) {
		v := warm(b, rdb, 1)
		buy := chain(e.Steps(), v, buyWith(buyer))
		_, err := buy(ctx, attempt(v.ID, 1))
		require.NoError(b, err)
		require.True(b, e.SoldOut.IsFlagged(v.ID))
		var user atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := buy(ctx, attempt(v.ID, user.Add(1)+1)); err == nil {
					b.Fatal("sold a sold-out voucher")
				}
			}
		})
	})
}

// The 503 of an open breaker (forced by ops), through every gate.
func BenchmarkBreakerOpen(b *testing.B) {
	rdb := stack.Redis(b)
	e, _ := newEdge(b, rdb, edge.Config{})
	require.NoError(b, e.Breaker.SetMode(context.Background(), edge.ModeOpen))
	var n atomic.Int64
	buy := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&n))
	for b.Loop() {
		if _, err := buy(context.Background(), attempt(1, 1)); err == nil {
			b.Fatal("passed an open breaker")
		}
	}
}

// BenchmarkPoWSolve is a farm's side of the proof of work: one core solving
// 12-bit challenges with the same hash the gateway checks. Its hashes/s is
// the per-core rate behind the README's cost table (Challenges): a buy at
// b bits costs a farm 2^b / (hashes/s) core-seconds on average.
func BenchmarkPoWSolve(b *testing.B) {
	const bits = 12
	hashes := 0
	for i := 0; b.Loop(); i++ {
		nonce := edge.Solve(strconv.Itoa(i)+"0123456789abcdef0123456789abcdef", bits)
		n, err := strconv.Atoi(nonce)
		if err != nil {
			b.Fatal(err)
		}
		hashes += n + 1
	}
	b.ReportMetric(float64(hashes)/b.Elapsed().Seconds(), "hashes/s")
}
