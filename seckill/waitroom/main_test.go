package waitroom_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack"
)

// envTestRedis hands the private redis-server's URL to the benchmarks of
// the package itself, which cannot see this package's variables.
const envTestRedis = "WAITROOM_TEST_REDIS_URL"

// redisURL is the package's private redis-server (the only service these
// tests need). Tests share it: each uses voucher ids no other test uses.
var redisURL string

// cluster is the package's private Redis Cluster of three masters, started
// by the first test that asks for both Redis shapes (clusterClient).
var cluster struct {
	sync.Mutex
	dir string
	c   *devstack.RedisCluster
	err error
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-waitroom-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: dir})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "waitroom tests need redis-server (apt-get install redis-server): %v\n", err)
		return 1
	}
	redisURL = r.URL
	cluster.dir = filepath.Join(dir, "cluster")
	// The package's own benchmarks (feed_bench_test.go) find it here.
	os.Setenv(envTestRedis, r.URL)
	code := m.Run()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.Stop(stopCtx)
	if cluster.c != nil {
		_ = cluster.c.Stop(stopCtx)
	}
	return code
}

// shape is a client of one Redis shape the room runs on.
type shape struct {
	name string
	rdb  redis.UniversalClient
}

// shapes are clients of both Redis shapes the room runs on: the plain
// redis-server and the Redis Cluster (started on the first call).
func shapes(t testing.TB) []shape {
	t.Helper()
	cluster.Lock()
	if cluster.c == nil && cluster.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cluster.c, cluster.err = devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{Dir: cluster.dir, Masters: 3})
		cancel()
	}
	c, err := cluster.c, cluster.err
	cluster.Unlock()
	if err != nil {
		t.Fatalf("waitroom tests need a Redis Cluster of redis-server processes: %v", err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, ClusterStateReloadInterval: time.Second})
	t.Cleanup(func() { _ = cc.Close() })
	return []shape{{"plain", client(t)}, {"cluster", cc}}
}

// client is a new connection pool to the shared redis-server: an instance
// of the fleet, as far as Redis can tell.
func client(t testing.TB) *redis.Client {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redisNow is Redis's clock, the one the scripts judge by.
func redisNow(t testing.TB, c *redis.Client) time.Time {
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// clusterClient is a client of a private Redis Cluster of three masters,
// started for the test and stopped when it ends.
func clusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	cluster, err := devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{Dir: t.TempDir(), Masters: 3})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cluster.Stop(stopCtx)
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cluster.Addrs})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
