package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisPoolSize is the connections a process keeps per Redis server (per
// node of a cluster): the buying path makes one script call per buy.
const redisPoolSize = 256

// clusterStateReload is how often the cluster client reads the slot map
// again while it is used. go-redis reads it again on a MOVED answer, but
// not when a master stops answering; its default (a minute) would leave
// the slots of a failed master unserved for that long after its replica
// took over (cluster-node-timeout plus an election, about two seconds).
const clusterStateReload = time.Second

// openRedis connects to Redis as configured: a Redis Cluster through its
// seed nodes when SECKILL_REDIS_CLUSTER_ADDRS is set, else the one server
// of SECKILL_REDIS_URL. Everything that uses Redis takes the
// redis.UniversalClient it returns, so nothing else knows which it is.
func openRedis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	// Every error names the variable and is told through urlError: a
	// string the client cannot read is quoted in its errors, and one it
	// misreads (a password with a '/' read as a host) shows up in the
	// address it dials.
	variable, raw, read := "SECKILL_REDIS_URL", cfg.RedisURL, readRedisURL
	if len(cfg.RedisCluster) > 0 {
		variable, raw, read = "SECKILL_REDIS_CLUSTER_ADDRS", strings.Join(cfg.RedisCluster, ","), readClusterAddrs
	}
	rdb, err := dialRedis(ctx, cfg)
	if err != nil {
		return nil, urlError(variable, raw, err, read)
	}
	return rdb, nil
}

// readRedisURL is the readConn of SECKILL_REDIS_URL: the network, address,
// user, database and TLS the client connects with.
func readRedisURL(s string) (string, error) {
	opts, err := redisURLOptions(s)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s user=%q db=%d tls=%t", opts.Network, opts.Addr, opts.Username, opts.DB, opts.TLSConfig != nil), nil
}

// readClusterAddrs is the readConn of SECKILL_REDIS_CLUSTER_ADDRS, its
// entries joined with commas as openRedis joins them.
func readClusterAddrs(s string) (string, error) {
	opts, err := clusterOptions(strings.Split(s, ","))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%q user=%q tls=%t", opts.Addrs, opts.Username, opts.TLSConfig != nil), nil
}

// dialRedis is openRedis without the masking of its errors.
func dialRedis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	var where string
	if len(cfg.RedisCluster) > 0 {
		opts, err := clusterOptions(cfg.RedisCluster)
		if err != nil {
			return nil, err
		}
		rdb, where = redis.NewClusterClient(opts), "the Redis Cluster at "+strings.Join(opts.Addrs, ",")
	} else {
		opts, err := redisURLOptions(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		opts.PoolSize = redisPoolSize
		rdb, where = redis.NewClient(opts), "redis at "+opts.Addr
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%s does not answer: %w", where, err)
	}
	return rdb, nil
}

// redisURLOptions reads SECKILL_REDIS_URL.
func redisURLOptions(s string) (*redis.Options, error) {
	opts, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("not a Redis URL (redis://user:password@host:port/db; %s): %w", escapePassword, err)
	}
	return opts, nil
}

// clusterOptions reads SECKILL_REDIS_CLUSTER_ADDRS: seed nodes host:port,
// or one redis:// URL in go-redis's cluster form (user, password and TLS
// settings, more seeds as addr=host:port parameters).
func clusterOptions(seeds []string) (*redis.ClusterOptions, error) {
	var opts *redis.ClusterOptions
	if len(seeds) == 1 && strings.Contains(seeds[0], "://") {
		o, err := redis.ParseClusterURL(seeds[0])
		if err != nil {
			return nil, fmt.Errorf("not a Redis Cluster URL (redis://user:password@host:port?addr=host:port; %s): %w", escapePassword, err)
		}
		opts = o
	} else {
		for _, s := range seeds {
			if strings.Contains(s, "://") || !strings.Contains(s, ":") {
				return nil, fmt.Errorf("%q is not host:port (a URL must be the only entry)", maskURL(s))
			}
		}
		opts = &redis.ClusterOptions{Addrs: seeds}
	}
	opts.PoolSize = redisPoolSize
	opts.ClusterStateReloadInterval = clusterStateReload
	return opts, nil
}
