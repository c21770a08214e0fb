package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedisCeilingHoldsStock runs the Redis ceiling small: redis-benchmark
// must have driven reserve.lua through the buying path's keys, which
// redisCeiling checks by the stock the calls held (a command with a wrong
// key or argument would be refused and fail it).
func TestRedisCeilingHoldsStock(t *testing.T) {
	rate, err := redisCeiling(context.Background(), t.TempDir(), 2000)
	require.NoError(t, err)
	require.Positive(t, rate)
}
