package orderid

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill/apperr"
)

// DefaultLeaseTTL is how long a node lease lives without renewal. Renewal
// runs every third of it, so two renewals may fail before the lease is lost.
const DefaultLeaseTTL = 30 * time.Second

// Lease is this instance's claim on one node id: the Redis key
// seckill:node:<n> holding a random owner token, with a TTL that Run renews
// while the instance runs. A crashed instance's lease simply expires, and its
// node id becomes free again.
type Lease struct {
	rdb     redis.UniversalClient
	log     *slog.Logger
	node    int64
	key     string
	token   string
	ttl     time.Duration
	renew   *redis.Script
	release *redis.Script

	taken     time.Time // when the key was set
	ready     chan struct{}
	closeOnce sync.Once
}

// ErrLeaseLost is what Run returns when the lease is lost.
var ErrLeaseLost = errors.New("orderid: lost the node id lease; stop making order ids, another instance may have the same node id")

// nodeKey is the Redis key of a node id's lease.
func nodeKey(n int64) string { return "seckill:node:" + strconv.FormatInt(n, 10) }

// LeaseNode claims a free node id (SET NX PX with a random owner token,
// trying the ids from a random start, usually one round trip). Give
// lease.Node() to New, run Run to keep it, and Close it at the end. It
// starts nothing.
func LeaseNode(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger) (*Lease, error) {
	return leaseNode(ctx, rdb, log, DefaultLeaseTTL)
}

func leaseNode(ctx context.Context, rdb redis.UniversalClient, log *slog.Logger, ttl time.Duration) (*Lease, error) {
	if log == nil {
		log = slog.Default()
	}
	l := &Lease{
		rdb:     rdb,
		log:     log,
		token:   rand.Text(),
		ttl:     ttl,
		renew:   redis.NewScript(lua.LeaseRenew),
		release: redis.NewScript(lua.LeaseRelease),
		ready:   make(chan struct{}),
	}
	// A random start keeps instances that start together from racing for
	// the same ids, and makes the immediate reuse of a just-released node id
	// (whose last ids a host with a slower clock could repeat) unlikely.
	start := mrand.Int64N(MaxNode + 1)
	for i := range int64(MaxNode + 1) {
		n := (start + i) % (MaxNode + 1)
		ok, err := rdb.SetNX(ctx, nodeKey(n), l.token, ttl).Result()
		if err != nil {
			return nil, fmt.Errorf("%w: lease node id: %w", apperr.ErrUnavailable, err)
		}
		if ok {
			l.node, l.key, l.taken = n, nodeKey(n), time.Now()
			log.InfoContext(ctx, "node id leased", "node", n, "ttl", ttl)
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: all %d node ids are leased", apperr.ErrUnavailable, MaxNode+1)
}

// Node is the leased node id.
func (l *Lease) Node() int64 { return l.node }

// Ready is closed once Run has renewed the lease for the first time: ids
// made from then on are covered by a lease renewed in Run's rhythm, however
// long the instance took to start after LeaseNode.
func (l *Lease) Ready() <-chan struct{} { return l.ready }

// Run renews the lease at once (closing Ready) and then every third of its
// TTL until ctx ends, and returns nil. It returns ErrLeaseLost when the
// lease is lost (renewals failed for a whole TTL, or another owner holds the
// key): the instance must then stop making ids. Call it once, and Close
// after it returned.
func (l *Lease) Run(ctx context.Context) error {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	renewed := l.taken
	for {
		ok, err := l.renewOnce(ctx)
		switch {
		case err == nil && ok:
			renewed = time.Now()
			select {
			case <-l.ready:
			default:
				close(l.ready)
			}
		case ctx.Err() != nil:
			return nil
		case err == nil:
			l.log.Error("node id lease taken by another owner; stop making order ids", "node", l.node)
			return ErrLeaseLost
		case time.Since(renewed) >= l.ttl:
			l.log.Error("node id lease expired while Redis was unreachable; stop making order ids",
				"node", l.node, "error", err)
			return ErrLeaseLost
		default:
			l.log.Warn("node id lease not renewed; retrying", "node", l.node, "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// renewOnce extends the lease if it is still ours, and claims the key again if
// it expired and nobody took it (a pause longer than the TTL). It reports
// whether the lease is held.
func (l *Lease) renewOnce(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.ttl/3)
	defer cancel()
	n, err := l.renew.Run(ctx, l.rdb, []string{l.key}, l.token, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, err
	}
	if n == 1 {
		return true, nil
	}
	ok, err := l.rdb.SetNX(ctx, l.key, l.token, l.ttl).Result()
	if err == nil && ok {
		l.log.Warn("node id lease had expired and was claimed again", "node", l.node)
	}
	return ok, err
}

// Close deletes the lease if it is still ours (compare-and-delete), so the
// node id is free at once. Call it once Run has returned (or without Run);
// it is safe to call more than once.
func (l *Lease) Close(ctx context.Context) error {
	var err error
	l.closeOnce.Do(func() {
		err = l.release.Run(ctx, l.rdb, []string{l.key}, l.token).Err()
		if err != nil && !errors.Is(err, redis.Nil) {
			err = fmt.Errorf("%w: release node id lease: %w", apperr.ErrUnavailable, err)
		} else {
			err = nil
		}
	})
	return err
}
