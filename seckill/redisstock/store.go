// Package redisstock is the Redis side of the stock: the reservation scripts
// and the keys around them. It implements seckill.Stock (the atomic reserve and
// its release) and the reads and repairs the rest of the fleet needs: warming
// a voucher, live stock figures, holds by order or user, the workers' confirm,
// the reconciler's pending list, drift snapshots and a rebuild from PostgreSQL.
// Store.Reserve, the buy's path, reads top to bottom in reserve.go, in the
// order it runs.
//
// The data model (one hash tag per voucher, see VoucherKeys):
//
//	seckill:{v42}:meta      hash   stock total begin_ms end_ms limit price held holds expire_ms
//	seckill:{v42}:ledger    hash   orderID -> "userID:qty:reservedAtMs:requestKey" | "x"
//	                               r<userID>:<requestKey> -> orderID
//	                               u<userID> -> "qty orderID ...": held or bought, live orders
//	                               s<orderID> -> 1: a keyed hold not promised yet (promise.go)
//	seckill:{v42}:pending   zset   orderID by reservedAtMs, until a worker confirms it
//	seckill:{v42}:released  zset   recent releases, forgotten after the idempotency window
//	seckill:shards:{v42}    string the voucher's bucket count
//
// Warming a voucher creates meta, the ledger and pending, each with the
// sale's expiry (the ledger and pending keep a sentinel, so they never
// vanish, and lose their expiry, when emptied): a buy is one script of
// seven commands and sets no expiry; the concurrent buys of one bucket share
// one script of seven commands (batch.go).
//
// A voucher created with shards K > 1 has K such sets of keys (buckets),
// tagged {v42}, {v42.1} ... {v42.K-1}, each with its share of the stock; a
// shopper buys in one bucket (shards.go and deploy/OPERATING.md, "One hot voucher over
// many Redis nodes").
//
// A "live hold" is an order's ledger entry that is not the tombstone "x": stock held
// for an order that is reserved, persisted or paid and was never released.
// Redis therefore keeps left + held == total for every voucher.
package redisstock

import (
	"cmp"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/tracing"
)

// Store is the Redis stock. It is safe for concurrent use.
type Store struct {
	rdb redis.UniversalClient
	// hot is what reservations go through: GroupCommit(rdb) unless
	// NoGroupCommit.
	hot      redis.Scripter
	reserve  *redis.Script
	release  *redis.Script
	snapshot *redis.Script
	warm     *redis.Script
	moveOut  *redis.Script
	moveIn   *redis.Script
	steer    *redis.Script
	// shards caches each voucher's bucket count (int64 -> int), read from
	// Keys.Shards once: a voucher's count never changes.
	shards  sync.Map
	metrics *Metrics
	asks    healAsks
	// grace is how long after a sale's end its keys live; window how long
	// a released order's tombstone and request key are remembered.
	grace, window time.Duration
	// quiet: Release does not announce on StockChannel.
	quiet bool
	// waitReplicas and waitTimeout: Config.WaitReplicas, WaitTimeout.
	waitReplicas int
	waitTimeout  time.Duration
	// replicas: each master's replica count under WaitReplicasAuto.
	replicas replicaWatch
	// promises sends the concurrent promises of a bucket in one HDEL.
	promises *promisers
	// abandoned: keyed reservations whose caller stopped waiting.
	abandoned abandonedAttempts
	// batches sends concurrent reservations of a bucket in one call
	// (batch.go); nil when Config.ReserveBatch is 1.
	batches *batchers
	// reserveBatch is reserve_batch.lua; limit its rate limit's ARGV
	// (Config.UserLimit).
	reserveBatch *redis.Script
	limit        [2]any
}

// UserLimit is a GCRA limit: Rate attempts a second, Burst at once.
type UserLimit struct{ Rate, Burst int }

// args is the limit as reserve_batch.lua's ARGV[2] and ARGV[3] take it: the
// emission interval in microseconds (0: no limit) and the burst.
func (l UserLimit) args() [2]any {
	if l.Rate <= 0 {
		return [2]any{int64(0), 1}
	}
	return [2]any{(time.Second / time.Duration(l.Rate)).Microseconds(), max(l.Burst, 1)}
}

// DefaultIdempotencyWindow is Config.IdempotencyWindow's default.
const DefaultIdempotencyWindow = 10 * time.Minute

// DefaultWaitTimeout is Config.WaitTimeout's default: many round trips of a
// data centre, and short enough that a master cut off from its replicas
// refuses buys at once rather than holding them.
const DefaultWaitTimeout = 100 * time.Millisecond

// Config is what New builds a Store from; a zero field means its default.
type Config struct {
	// Redis is a client, a cluster client or a failover client: every
	// multi-key command stays in one voucher's slot.
	Redis redis.UniversalClient
	// StateGrace is how long after a sale's end its keys live (meta,
	// holds, tombstones, request keys): they expire at EndAt + StateGrace,
	// and what a replay or an order lookup needs then is answered by
	// PostgreSQL (seckill.DefaultStateGrace).
	StateGrace time.Duration
	// IdempotencyWindow is how long a released (cancelled, failed) order's
	// tombstone and request key are remembered while its sale runs: within
	// it a replayed key answers with the released order; after it the key
	// is a new attempt. Holds that are live (reserved, created, paid) keep
	// their request keys for the sale's life. Zero takes
	// DefaultIdempotencyWindow; a negative window keeps everything for the
	// sale's life.
	IdempotencyWindow time.Duration
	// Metrics, when set, times the Store's scripts.
	Metrics *Metrics
	// NoStockAnnouncements makes Release give stock back without
	// publishing on StockChannel, so gateways learn it only from their
	// re-check; tests of that re-check set it.
	NoStockAnnouncements bool
	// NoGroupCommit sends each reservation in a round trip of its own (see
	// GroupCommit); benchmarks compare the two.
	NoGroupCommit bool
	// WaitReplicas, when positive, makes a hold count only once that many
	// replicas of the voucher's master have it: reserve.lua goes to the
	// master in one pipeline with WAIT, and a hold the replicas did not
	// acknowledge within WaitTimeout is given back and the buy refused as
	// unavailable. Redis replicates asynchronously, so without it a master
	// cut off from its replicas acknowledges holds that a failover then
	// loses (deploy/tools/netlab/README.md). A batch of concurrent buys
	// (ReserveBatch) waits once for all its holds; the batch leaves the
	// group commit for a round trip of its own, adds the replication's
	// delay, and every buy is refused while the master has fewer replicas.
	// WaitReplicasAuto waits for one replica on a master that has some and
	// for none on a master alone (replicas.go).
	WaitReplicas int
	// WaitTimeout bounds WaitReplicas' wait (DefaultWaitTimeout).
	WaitTimeout time.Duration
	// ReplicaCheck is how often WaitReplicasAuto reads a master's replica
	// count again (DefaultReplicaCheck).
	ReplicaCheck time.Duration
	// ReserveBatch bounds how many reservations of one bucket go to Redis
	// in one call of reserve_batch.lua (batch.go; DefaultReserveBatch when
	// zero). 1 sends each in a call of reserve.lua of its own.
	ReserveBatch int
	// UserLimit, when its Rate is positive, bounds each shopper's buys of
	// one voucher bucket inside the reservation's own script (GCRA, as
	// redis_rate; lua/reserve_batch.lua): a buy over it is refused
	// apperr.ErrRateLimited with its Retry-After, and holds nothing.
	UserLimit UserLimit
	// Tracer, when set, makes a span of each script call of the buying
	// path in the caller's trace (seckill/tracing); the other calls get
	// theirs from the client's hook (tracing.RedisHook).
	Tracer trace.Tracer
}

// New returns a Store over cfg.Redis.
func New(cfg Config) *Store {
	rdb := cfg.Redis
	s := &Store{
		rdb:      rdb,
		reserve:  redis.NewScript(lua.Reserve),
		release:  redis.NewScript(lua.Release),
		snapshot: redis.NewScript(lua.Snapshot),
		warm:     redis.NewScript(lua.Warm),
		moveOut:  redis.NewScript(lua.MoveOut),
		moveIn:   redis.NewScript(lua.MoveIn),
		steer:    redis.NewScript(lua.Steer),
		grace:    cfg.StateGrace,
		window:   cfg.IdempotencyWindow,
		metrics:  cfg.Metrics,
		quiet:    cfg.NoStockAnnouncements,

		waitReplicas: cfg.WaitReplicas,
		waitTimeout:  cfg.WaitTimeout,
		replicas:     replicaWatch{every: cmp.Or(cfg.ReplicaCheck, DefaultReplicaCheck)},
	}
	if s.waitTimeout <= 0 {
		s.waitTimeout = DefaultWaitTimeout
	}
	if s.grace <= 0 {
		s.grace = seckill.DefaultStateGrace
	}
	switch {
	case s.window == 0:
		s.window = DefaultIdempotencyWindow
	case s.window < 0:
		s.window = 0 // the scripts keep everything for the sale's life
	}
	s.reserveBatch, s.limit = redis.NewScript(lua.ReserveBatch), cfg.UserLimit.args()
	if batch := cmp.Or(cfg.ReserveBatch, DefaultReserveBatch); batch > 1 {
		s.batches = &batchers{max: batch, limit: s.limit, run: s.runBatch}
	}
	// The promises' HDELs share the buy path's round trips too: one that
	// meets a reservation batch in flight leaves with the next one.
	group := GroupCommit(rdb)
	s.hot = group
	switch {
	case cfg.NoGroupCommit:
		s.hot, group = rdb, rdb // its script calls go through the client's hook
	case cfg.Tracer != nil:
		s.hot = tracing.Scripter(s.hot, cfg.Tracer)
	}
	s.promises = &promisers{rdb: group}
	return s
}

var _ seckill.Stock = (*Store)(nil)

// unavailable wraps a Redis failure in the platform's sentinel.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", apperr.ErrUnavailable, what, err)
}
