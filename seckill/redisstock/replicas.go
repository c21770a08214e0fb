package redisstock

// How many replicas a hold waits for. An explicit Config.WaitReplicas is
// taken as it is; WaitReplicasAuto waits for one replica on a master that
// has any, and for none on a master alone. A master alone has no copy a
// failover could lose a hold from, and WAIT 1 there would refuse every buy;
// a master with replicas may be replaced by one of them, and what it has
// not copied yet is then gone (deploy/OPERATING.md).
//
// Each master's count of connected replicas (INFO replication) is read
// once before its first hold, then again in the background when the last
// read is older than Config.ReplicaCheck, while buys go on with the count
// they have: a replica added or lost changes what the buys wait for within
// that period, with no round trip on the buying path.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// WaitReplicasAuto is the Config.WaitReplicas that waits for one replica
// where the voucher's master has connected replicas, and for none where it
// has none.
const WaitReplicasAuto = -1

// DefaultReplicaCheck is Config.ReplicaCheck's default: a replica that
// joins or leaves changes what holds wait for within a few seconds, for one
// INFO a master every so often.
const DefaultReplicaCheck = 5 * time.Second

// replicaWatch is the connected-replica count of each master the Store
// reserved on, by its address.
type replicaWatch struct {
	every time.Duration
	m     sync.Map // string -> *replicaCount
}

// replicaCount is one master's count and when it was read.
type replicaCount struct {
	mu      sync.Mutex // held by the first read only
	n       atomic.Int64
	checked atomic.Int64 // UnixNano of the last read; 0: never read
	reading atomic.Bool  // a background read is on its way
}

// want is how many replicas a hold on node (at addr) waits for: 1 when it
// has connected replicas, else 0. A master never read is read now; a first
// read that fails counts as replicas present, so an unknown master waits
// (and refuses what it cannot copy) rather than promise holds on trust; a
// later read that fails keeps the count last read.
func (w *replicaWatch) want(ctx context.Context, node redis.Cmdable, addr string) int {
	v, ok := w.m.Load(addr)
	if !ok {
		v, _ = w.m.LoadOrStore(addr, &replicaCount{})
	}
	c := v.(*replicaCount)
	checked := c.checked.Load()
	if checked == 0 {
		c.mu.Lock()
		if c.checked.Load() == 0 {
			c.read(ctx, node)
		}
		c.mu.Unlock()
	} else if time.Since(time.Unix(0, checked)) > w.every && c.reading.CompareAndSwap(false, true) {
		go func() {
			defer c.reading.Store(false)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptWait)
			defer cancel()
			c.read(rctx, node)
		}()
	}
	return int(min(c.n.Load(), 1))
}

func (c *replicaCount) read(ctx context.Context, node redis.Cmdable) {
	n, err := connectedReplicas(ctx, node)
	switch {
	case err == nil:
		c.n.Store(n)
	case c.checked.Load() == 0:
		// Never read: assume a replica, so no hold is promised that a
		// failover could lose before the master was ever asked.
		c.n.Store(1)
	}
	// A failed re-read keeps the last count: turning it into "one
	// replica" would refuse every hold of a lone master until the next
	// read, and the master that just answered the reservations is not
	// likelier to have gained a replica than to have kept its count.
	c.checked.Store(time.Now().UnixNano())
}

// connectedReplicas reads connected_slaves of node's INFO replication.
func connectedReplicas(ctx context.Context, node redis.Cmdable) (int64, error) {
	info, err := node.Info(ctx, "replication").Result()
	if err != nil {
		return 0, fmt.Errorf("info replication: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("info replication: no connected_slaves")
}
