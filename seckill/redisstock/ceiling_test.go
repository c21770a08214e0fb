package redisstock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// TestReserveCommandIsABuy runs ReserveCommand the way redis-benchmark does,
// with the placeholder replaced by a number, and checks the store sees what
// Reserve would have left: one unit held by that user under that order id.
func TestReserveCommandIsABuy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	v := b.onSale(t, 5, 1)
	sha, err := b.rdb.ScriptLoad(ctx, lua.Reserve).Result()
	require.NoError(t, err)

	id := next()
	var args []any
	for _, a := range redisstock.ReserveCommand(sha, v.ID, "__rand_int__") {
		args = append(args, strings.ReplaceAll(a, "__rand_int__", strconv.FormatInt(id, 10)))
	}
	require.NoError(t, b.rdb.Do(ctx, args...).Err())

	h, ok, err := b.store.Hold(ctx, id, []int64{v.ID})
	require.NoError(t, err)
	require.True(t, ok, "the command held nothing under order %d", id)
	require.Equal(t, id, h.UserID)
	require.Equal(t, int64(1), h.Quantity)
	left, err := b.store.StockLeft(ctx, v.ID)
	require.NoError(t, err)
	require.Equal(t, v.StockLeft-1, left[v.ID])
	b.balanced(t, v)
}
