package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// FleetKey is the default Redis sorted set in which the gateway instances
// heartbeat: member an instance id, score its last beat (Redis time, unix ms).
const FleetKey = "seckill:rl:instances"

// beatScript is one heartbeat in one round trip: record this instance, drop
// the instances silent for longer than the stale window, count the rest. The
// time is Redis's own (TIME), not the instance's, so instances whose clocks
// disagree never evict each other. The key expires when the whole fleet has
// been silent for a while, so a test or a dead fleet leaves nothing behind.
//
// KEYS[1] the set; ARGV[1] instance id, ARGV[2] stale window ms, ARGV[3] key ttl ms.
var beatScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('ZCARD', KEYS[1])
`)

// fleet learns how many gateway instances are alive, so that each enforces
// its 1/N share of the global limit. It is read on every buy (an atomic
// load) and written once a beat.
type fleet struct {
	rdb   redis.UniversalClient
	key   string
	id    string
	every time.Duration // between beats
	stale time.Duration // silence after which an instance is dropped
	log   *slog.Logger
	// resized is called with the new count whenever it changes (it starts
	// at 1: alone until Redis says otherwise).
	resized func(n int)

	size atomic.Int64 // last count; 1 until the first beat answers
}

func newFleet(rdb redis.UniversalClient, key string, every time.Duration, log *slog.Logger, resized func(int)) *fleet {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	f := &fleet{
		rdb: rdb, key: key, every: every, stale: 3 * every, log: log, resized: resized,
		id: fmt.Sprintf("%s:%d:%016x", host, os.Getpid(), rand.Uint64()),
	}
	f.size.Store(1)
	return f
}

// n is the number of live instances, this one included, as last counted.
func (f *fleet) n() int { return int(f.size.Load()) }

// beat heartbeats and recounts. If Redis does not answer the last count is
// kept: the instances cannot have agreed on a new one either, and the
// reservations behind the limit fail without Redis anyway.
func (f *fleet) beat(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(f.every, 200*time.Millisecond))
	defer cancel()
	staleMS := strconv.FormatInt(f.stale.Milliseconds(), 10)
	ttlMS := strconv.FormatInt((10 * f.stale).Milliseconds(), 10)
	n, err := beatScript.Run(ctx, f.rdb, []string{f.key}, f.id, staleMS, ttlMS).Int64()
	if err != nil || n < 1 {
		if !errors.Is(err, context.Canceled) {
			f.log.Debug("fleet heartbeat failed; keeping the last instance count", "instances", f.n(), "err", err)
		}
		return
	}
	if old := f.size.Swap(n); old != n {
		f.log.Info("gateway instances counted; global rate limit share adjusted", "instances", n, "was", old)
		f.resized(int(n))
	}
}

// run heartbeats every f.every until ctx ends, then takes this instance out
// of the set so the others grow their share at their next beat instead of
// after the stale window.
func (f *fleet) run(ctx context.Context) {
	every(ctx, f.every, f.beat)
	f.leave(context.WithoutCancel(ctx))
}

// every calls fn every d until ctx ends: the edge's background loops.
func every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

func (f *fleet) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := f.rdb.ZRem(ctx, f.key, f.id).Err(); err != nil {
		f.log.Debug("fleet leave failed; the others drop this instance after the stale window", "err", err)
	}
}
