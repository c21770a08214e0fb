package draw_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack"
)

// The package's two Redis shapes, shared by its tests (each test uses
// voucher ids no other uses): a plain redis-server and a Redis Cluster of
// three masters.
var redisURL string
var clusterAddrs []string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-draw-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: dir + "/plain"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "draw tests need redis-server (apt-get install redis-server): %v\n", err)
		return 1
	}
	c, err := devstack.StartRedisCluster(ctx, devstack.RedisClusterOptions{Dir: dir + "/cluster", Masters: 3})
	if err != nil {
		fmt.Fprintf(os.Stderr, "draw tests need a Redis Cluster: %v\n", err)
		_ = r.Stop(ctx)
		return 1
	}
	redisURL, clusterAddrs = r.URL, c.Addrs
	code := m.Run()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Stop(stopCtx)
	_ = r.Stop(stopCtx)
	return code
}

// shapes is a new client of each Redis shape: an instance of the fleet, as
// far as Redis can tell.
func shapes(t testing.TB) map[string]redis.UniversalClient {
	return map[string]redis.UniversalClient{"plain": plain(t), "cluster": cluster(t)}
}

func plain(t testing.TB) redis.UniversalClient {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func cluster(t testing.TB) redis.UniversalClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fresh makes another client of the same shape as c.
func fresh(t testing.TB, c redis.UniversalClient) redis.UniversalClient {
	if _, ok := c.(*redis.ClusterClient); ok {
		return cluster(t)
	}
	return plain(t)
}
