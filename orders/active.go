package orders

import (
	"context"
	"sync"
	"time"
)

// activeWindow is how long after a seckill voucher's end its reservations
// may still be live in Redis (unpaid orders wait for their deadline).
const activeWindow = 24 * time.Hour

// ActiveLister reads the seckill vouchers whose sale ends after since
// (pgstore.Store implements it).
type ActiveLister interface {
	ActiveSeckillVoucherIDs(ctx context.Context, since time.Time) ([]int64, error)
}

// ActiveCache caches the ids of seckill vouchers that can have live holds in
// Redis, so reading an order does not query PostgreSQL for them each time.
// Its IDs method is an ActiveVouchers.
type ActiveCache struct {
	src ActiveLister
	ttl time.Duration

	mu      sync.Mutex
	ids     []int64
	fetched time.Time // when the read that gave ids began
}

// NewActiveCache returns a cache over src whose copy is read again when it is
// older than ttl.
func NewActiveCache(src ActiveLister, ttl time.Duration) *ActiveCache {
	return &ActiveCache{src: src, ttl: ttl}
}

// IDs implements ActiveVouchers: the cached ids, read again when older than
// the ttl or read before since. Callers waiting on one read share it.
func (a *ActiveCache) IDs(ctx context.Context, since time.Time) ([]int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if time.Since(a.fetched) < a.ttl && !a.fetched.Before(since) {
		return a.ids, nil
	}
	began := time.Now()
	ids, err := a.src.ActiveSeckillVoucherIDs(ctx, began.Add(-activeWindow))
	if err != nil {
		return nil, err
	}
	a.ids, a.fetched = ids, began
	return ids, nil
}
