// Package redisstocktest lets the tests of other packages look at and
// disturb the stock's Redis state without spelling its keys: redisstock
// stays the one package that knows the layout. It is for tests only;
// nothing in production imports it.
package redisstocktest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// BucketStock is the stock left in one bucket of a voucher (meta's stock).
func BucketStock(t testing.TB, rdb redis.Cmdable, voucherID int64, bucket int) int64 {
	t.Helper()
	n, err := rdb.HGet(context.Background(), redisstock.BucketKeys(voucherID, bucket).Meta, "stock").Int64()
	require.NoError(t, err)
	return n
}

// BucketOnSale says whether a bucket of a voucher has its meta in Redis.
func BucketOnSale(t testing.TB, rdb redis.Cmdable, voucherID int64, bucket int) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), redisstock.BucketKeys(voucherID, bucket).Meta).Result()
	require.NoError(t, err)
	return n == 1
}

// HalfMove runs only the first step of a stock move (move_out.lua): qty
// units leave bucket from for bucket to under the move id transferID, as
// when the mover died before the second step. It returns what was debited.
func HalfMove(t testing.TB, rdb redis.Scripter, voucherID int64, from, to int, qty int64, transferID string) int64 {
	t.Helper()
	k := redisstock.BucketKeys(voucherID, from)
	raw, err := redis.NewScript(lua.MoveOut).Run(context.Background(), rdb, []string{k.Meta, k.Moves}, transferID, qty, to).Slice()
	require.NoError(t, err)
	n, ok := raw[0].(int64)
	require.True(t, ok, "move_out.lua answered %v", raw)
	return n
}
