package devstack_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
)

// TestRedisClusterFailoverAndReuse makes a 3-master cluster with one replica
// each, kills a master and sees its replica take its slots, brings the old
// master back as a replica, then stops everything and starts it again from
// the same folder (dev mode's Persist), with the data still there.
func TestRedisClusterFailoverAndReuse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := scratch(t)
	opts := devstack.RedisClusterOptions{Dir: dir, Masters: 3, Replicas: 1, NodeTimeout: time.Second, Persist: true, Log: testLogger(t)}
	began := time.Now()
	c, err := devstack.StartRedisCluster(ctx, opts)
	require.NoError(t, err)
	t.Logf("3 masters + 3 replicas up in %v", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.Len(t, c.Addrs, 6)
	require.Len(t, c.Pids(), 6)
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)

	// The client reads the slot map again every second (go-redis's default
	// is a minute), as the system's does, so it finds the promoted replica.
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ClusterStateReloadInterval: time.Second})
	defer rdb.Close()
	// Keys on every master: 64 keys hash over all three.
	for i := range 64 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err())
	}
	shards, err := rdb.ClusterShards(ctx).Result()
	require.NoError(t, err)
	require.Len(t, shards, 3)

	// Kill the master of k7's slot: its replica is promoted and k7 readable.
	slot, err := rdb.ClusterKeySlot(ctx, "k7").Result()
	require.NoError(t, err)
	var victim string
	for _, s := range shards {
		for _, r := range s.Slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) {
				for _, n := range s.Nodes {
					if n.Role == "master" {
						victim = fmt.Sprintf("%s:%d", n.IP, n.Port)
					}
				}
			}
		}
	}
	require.Contains(t, masters, victim)
	require.NoError(t, c.Kill(victim))
	killed := time.Now()
	require.Eventually(t, func() bool {
		m, err := c.Masters(ctx)
		return err == nil && len(m) == 3 && !slices.Contains(m, victim)
	}, 30*time.Second, 50*time.Millisecond, "no replica took over from %s", victim)
	t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The client learns the new map when it next reloads it; ask it to, so
	// that a busy machine's slow lazy reload does not fail the test.
	require.Eventually(t, func() bool {
		rdb.ReloadState(ctx)
		v, err := rdb.Get(ctx, "k7").Int()
		return err == nil && v == 7
	}, 20*time.Second, 50*time.Millisecond)

	require.NoError(t, c.Restart(ctx, victim))
	require.NoError(t, c.WaitHealthy(ctx))
	masters, err = c.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	require.NotContains(t, masters, victim, "the old master comes back as a replica")

	// Stop and start from the same folder: same nodes, same data.
	require.NoError(t, c.Stop(ctx))
	for _, pid := range c.Pids() {
		require.False(t, devstack.Alive(pid))
	}
	c2, err := devstack.StartRedisCluster(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	require.Equal(t, c.Addrs, c2.Addrs, "the same ports come back")
	rdb2 := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c2.Addrs})
	defer rdb2.Close()
	for i := range 64 {
		v, err := rdb2.Get(ctx, fmt.Sprintf("k%d", i)).Int()
		require.NoError(t, err)
		require.Equal(t, i, v)
	}
}

func TestRedisClusterNeedsThreeMasters(t *testing.T) {
	t.Parallel()
	_, err := devstack.StartRedisCluster(t.Context(), devstack.RedisClusterOptions{Dir: t.TempDir(), Masters: 2})
	require.ErrorContains(t, err, "at least 3 masters")
}

// TestRedisClusterReplicaLag: masters refuse writes no replica acknowledged
// within the lag, and take them while their replicas keep up.
func TestRedisClusterReplicaLag(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, err := devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{Dir: t.TempDir(), Masters: 3, ReplicaLag: time.Second})
	require.ErrorContains(t, err, "needs replicas")

	c, err := devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{Dir: scratch(t), Masters: 3, Replicas: 1,
		ReplicaLag: 1500 * time.Millisecond, Log: testLogger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	masters, err := c.Masters(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	for _, m := range masters {
		node := redis.NewClient(&redis.Options{Addr: m})
		got, err := node.ConfigGet(ctx, "min-replicas-*").Result()
		_ = node.Close()
		require.NoError(t, err)
		require.Equal(t, map[string]string{"min-replicas-to-write": "1", "min-replicas-max-lag": "1"}, got, "master %s", m)
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer rdb.Close()
	for i := range 16 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(), "a master whose replica keeps up takes writes")
	}
}
