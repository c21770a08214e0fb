package orders

import (
	"context"
	"sync"
	"time"
)

// activeWindow is how long after a seckill voucher's end its reservations
// may still be live in Redis (unpaid orders wait for their deadline).
const activeWindow = 24 * time.Hour

// activeReadTimeout bounds one shared read of the active vouchers: it runs
// for every caller waiting on it, so no single caller's cancellation ends it.
const activeReadTimeout = 5 * time.Second

// ActiveCache caches the ids of seckill vouchers that can have live holds in
// Redis, so reading an order does not query PostgreSQL for them each time.
// Its IDs method is an ActiveVouchers.
//
// A lookup of an order id that carries the current time needs a copy read
// from now on, so anyone can force reads by sending fresh ids. The lock is
// therefore never held across the query: a caller content with the copy it
// finds is answered at once, even while a read runs, and the callers that
// need a newer copy wait for one shared read (the one in flight when it
// began late enough, or else the next one, which one of them starts) instead
// of a query each.
type ActiveCache struct {
	src Record
	ttl time.Duration

	mu      sync.Mutex
	ids     []int64
	fetched time.Time   // when the read that gave ids began
	reading *activeRead // the read in flight, nil when none
}

// activeRead is one read of the active vouchers, shared by its waiters.
type activeRead struct {
	began time.Time
	done  chan struct{} // closed when ids and err are set
	ids   []int64
	err   error
}

// NewActiveCache returns a cache over src whose copy is read again when it is
// older than ttl.
func NewActiveCache(src Record, ttl time.Duration) *ActiveCache {
	return &ActiveCache{src: src, ttl: ttl}
}

// IDs implements ActiveVouchers: the cached ids, read again when older than
// the ttl or read before since. Callers waiting on one read share it.
func (a *ActiveCache) IDs(ctx context.Context, since time.Time) ([]int64, error) {
	for {
		a.mu.Lock()
		if time.Since(a.fetched) < a.ttl && !a.fetched.Before(since) {
			ids := a.ids
			a.mu.Unlock()
			return ids, nil
		}
		r := a.reading
		if r == nil {
			r = &activeRead{began: time.Now(), done: make(chan struct{})}
			a.reading = r
			go a.read(context.WithoutCancel(ctx), r)
		}
		a.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err != nil {
			return nil, r.err
		}
		if !r.began.Before(since) {
			return r.ids, nil
		}
		// That read began before the moment this caller needs: share the
		// next one.
	}
}

// read runs r and publishes its result.
func (a *ActiveCache) read(ctx context.Context, r *activeRead) {
	ctx, cancel := context.WithTimeout(ctx, activeReadTimeout)
	defer cancel()
	r.ids, r.err = a.src.ActiveSeckillVoucherIDs(ctx, r.began.Add(-activeWindow))
	a.mu.Lock()
	if r.err == nil && r.began.After(a.fetched) {
		a.ids, a.fetched = r.ids, r.began
	}
	a.reading = nil
	a.mu.Unlock()
	close(r.done)
}
