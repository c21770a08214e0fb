package redisstock_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/redisstock"
)

// TestBucketKeysSpelling holds every key of a bucket to its spelling (the
// layout keys.go documents, which lua/ and the tools read too): the one
// string BucketKeys cuts them from gives each its own name, no more.
func TestBucketKeysSpelling(t *testing.T) {
	for _, id := range []int64{1, 42, 7340032145, math.MaxInt64} {
		for _, b := range []int{0, 1, 7, 63, 1000} {
			tag := "v" + strconv.FormatInt(id, 10)
			p := "seckill:{" + tag
			if b > 0 {
				p += "." + strconv.Itoa(b)
			}
			p += "}:"
			require.Equal(t, redisstock.Keys{
				Meta: p + "meta", Ledger: p + "ledger", Pending: p + "pending", Released: p + "released",
				Moves: p + "moves", Credited: p + "credited", Fence: p + "fence",
				Heal: "seckill:{" + tag + "}:heal", HealFence: "seckill:{" + tag + "}:healfence",
				Shards: "seckill:shards:{" + tag + "}", Bucket: b,
			}, redisstock.BucketKeys(id, b), "voucher %d, bucket %d", id, b)
		}
	}
	require.Equal(t, "seckill:{v42}:meta", redisstock.OnSaleKey(42))
}

// BenchmarkBucketKeys is the naming of one bucket's keys, twice per buy on
// the gateway.
func BenchmarkBucketKeys(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if k := redisstock.BucketKeys(7340032145, i%8); k.Meta == "" {
			b.Fatal("no meta key")
		}
	}
}
