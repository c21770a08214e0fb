package orderid

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func client(t *testing.T) *redis.Client {
	t.Helper()
	return stack.Redis(t)
}

func TestLeasesGetDifferentNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t)
	seen := map[int64]bool{}
	var leases []*Lease
	for range 20 {
		l, err := LeaseNode(ctx, rdb, nil)
		require.NoError(t, err)
		require.False(t, seen[l.Node()], "node %d leased twice", l.Node())
		seen[l.Node()] = true
		leases = append(leases, l)
		ttl, err := rdb.PTTL(ctx, nodeKey(l.Node())).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, DefaultLeaseTTL/2)
	}
	for _, l := range leases {
		require.NoError(t, l.Close(ctx))
		require.NoError(t, l.Close(ctx), "close twice")
		n, err := rdb.Exists(ctx, nodeKey(l.Node())).Result()
		require.NoError(t, err)
		require.Zero(t, n, "closed lease is deleted")
	}
}

func TestLeaseIsRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t)
	l, err := leaseNode(ctx, rdb, nil, 300*time.Millisecond)
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- l.Run(runCtx) }()
	<-l.Ready()
	t.Cleanup(func() { _ = l.Close(ctx) })
	time.Sleep(time.Second)
	owner, err := rdb.Get(ctx, nodeKey(l.Node())).Result()
	require.NoError(t, err)
	require.Equal(t, l.token, owner, "still ours after three TTLs")

	// A lease that expired (a long pause) and was not taken is claimed again.
	require.NoError(t, rdb.Del(ctx, nodeKey(l.Node())).Err())
	require.Eventually(t, func() bool {
		owner, err := rdb.Get(ctx, nodeKey(l.Node())).Result()
		return err == nil && owner == l.token
	}, 2*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-ran, "the lease was never lost")
}

func TestLeaseTakenByAnotherOwnerIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := client(t)
	l, err := leaseNode(ctx, rdb, nil, 300*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, nodeKey(l.Node()), "someone-else", time.Minute).Err())
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.ErrorIs(t, l.Run(runCtx), ErrLeaseLost)
	// Close must not delete the other owner's key.
	require.NoError(t, l.Close(ctx))
	owner, err := rdb.Get(ctx, nodeKey(l.Node())).Result()
	require.NoError(t, err)
	require.Equal(t, "someone-else", owner)
	require.NoError(t, rdb.Del(ctx, nodeKey(l.Node())).Err())
}
