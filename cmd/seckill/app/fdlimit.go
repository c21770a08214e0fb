package app

// The open-file limit: every client connection is a descriptor, and so is
// every connection of the pools. The gateway's caps are sized from the limit
// less what the pools may open, so that a flood of connections cannot take
// the descriptors Redis, PostgreSQL and Kafka need.

import (
	"fmt"
	"log/slog"
	"syscall"

	"github.com/flashsale/seckill/gateway"
)

// fdOtherReserve is what the reserve keeps besides the Redis and PostgreSQL
// pools: the Kafka clients' connections (and in dev mode the in-process
// broker's side of them), the listener, logs, pipes to the dev services,
// files of the static pages, the runtime's own.
const fdOtherReserve = 256

// openFileLimit raises the soft limit on open files to the hard one when it
// is lower (the soft limit is often 1024, which a few hundred shoppers
// reach), and returns the limit then in force.
func openFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	return lim.Cur, nil
}

// descriptorReserve is the descriptors kept out of the gateway's caps:
// every Redis server's pool (each master of a cluster; at least three),
// both PostgreSQL pools, and fdOtherReserve.
func (c Config) descriptorReserve() uint64 {
	servers := 1
	if len(c.RedisCluster) > 0 {
		servers = max(len(c.RedisCluster), 3)
	}
	return uint64(redisPoolSize*servers) + uint64(c.DBGatewayConns) + uint64(c.DBWorkerConns) + fdOtherReserve
}

// connCaps are the gateway's caps on connections and sockets.
type connCaps struct {
	maxConns, maxSockets int
	signedIn             int // of maxSockets, only for signed-in sockets
}

// liveReserve is signedIn as gateway.Live.SignedInReserve takes it, where
// zero means its default: negative for none.
func (c connCaps) liveReserve() int {
	if c.signedIn > 0 {
		return c.signedIn
	}
	return -1
}

// sizeConnCaps raises the open-file limit, sizes the caps below it and logs
// both.
func (c Config) sizeConnCaps(log *slog.Logger) (connCaps, error) {
	limit, err := openFileLimit()
	if err != nil {
		return connCaps{}, err
	}
	reserve := c.descriptorReserve()
	conns, sockets, err := gateway.DescriptorCaps(limit, reserve)
	if err != nil {
		return connCaps{}, err
	}
	caps := connCaps{maxConns: conns, maxSockets: sockets, signedIn: sockets * c.WSSignedInPercent / 100}
	log.Info("connections capped below the open-file limit", "open_file_limit", limit, "reserve", reserve,
		"max_connections", conns, "max_websockets", sockets, "signed_in_websockets", caps.signedIn,
		"connections_per_address", c.ConnsPerAddr, "websockets_per_address", c.WSPerAddr)
	return caps, nil
}
