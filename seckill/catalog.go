package seckill

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// VoucherStore is the record of vouchers (PostgreSQL).
type VoucherStore interface {
	// CreateVoucher stores v and calls beforeCommit with the stored voucher
	// inside the same transaction; the voucher exists only if both succeed.
	CreateVoucher(ctx context.Context, v Voucher, beforeCommit func(context.Context, Voucher) error) (Voucher, error)
	Voucher(ctx context.Context, id int64) (Voucher, error)
	Vouchers(ctx context.Context) ([]Voucher, error)
}

// StockKeeper puts seckill vouchers on sale in the fast store and reads their
// live stock.
type StockKeeper interface {
	Warm(ctx context.Context, v Voucher) error
	Unwarm(ctx context.Context, voucherID int64) error
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// Catalog is the list of vouchers with their live stock. It keeps a short
// lived copy of each voucher for the buying path, which must not read
// PostgreSQL once per request.
type Catalog struct {
	store VoucherStore
	stock StockKeeper
	ttl   time.Duration
	now   func() time.Time

	mu     sync.Mutex
	cached map[int64]cachedVoucher
}

type cachedVoucher struct {
	v       Voucher
	fetched time.Time
}

// NewCatalog returns a Catalog over the record and the fast store. ttl bounds
// how stale the buying path's copy of a voucher may be.
func NewCatalog(store VoucherStore, stock StockKeeper, ttl time.Duration) *Catalog {
	return &Catalog{store: store, stock: stock, ttl: ttl, now: time.Now, cached: make(map[int64]cachedVoucher)}
}

// Create validates and stores a voucher. A seckill voucher is warmed in the
// fast store inside the record's transaction, so the two never disagree: if
// warming fails, nothing is stored and the error says the fast store is
// unavailable.
func (c *Catalog) Create(ctx context.Context, v Voucher) (Voucher, error) {
	v.StockLeft = v.StockTotal
	if err := v.Validate(); err != nil {
		return Voucher{}, err
	}
	var warmed int64 // the id put on sale in the fast store, if any
	warm := func(ctx context.Context, stored Voucher) error {
		if stored.Kind != KindSeckill {
			return nil
		}
		if err := c.stock.Warm(ctx, stored); err != nil {
			return fmt.Errorf("%w: voucher not created, its stock could not be put on sale: %w", ErrUnavailable, err)
		}
		warmed = stored.ID
		return nil
	}
	stored, err := c.store.CreateVoucher(ctx, v, warm)
	if err != nil && warmed != 0 {
		// Warmed but the record's commit failed: take it off sale again so
		// the fast store never sells a voucher the record does not know.
		if unErr := c.stock.Unwarm(context.WithoutCancel(ctx), warmed); unErr != nil {
			return Voucher{}, fmt.Errorf("%w (and taking voucher %d off sale failed too: %w)", err, warmed, unErr)
		}
	}
	if err != nil {
		return Voucher{}, err
	}
	return stored, nil
}

// Get returns one voucher with its live stock.
func (c *Catalog) Get(ctx context.Context, id int64) (Voucher, error) {
	v, err := c.store.Voucher(ctx, id)
	if err != nil {
		return Voucher{}, err
	}
	vs, err := c.withLiveStock(ctx, []Voucher{v})
	if err != nil {
		return Voucher{}, err
	}
	return vs[0], nil
}

// List returns every voucher with its live stock.
func (c *Catalog) List(ctx context.Context) ([]Voucher, error) {
	vs, err := c.store.Vouchers(ctx)
	if err != nil {
		return nil, err
	}
	return c.withLiveStock(ctx, vs)
}

// Cached returns a voucher as it was at most ttl ago, for the buying path:
// kind, window and captcha flag change rarely, and the reservation itself
// checks stock and window atomically anyway.
func (c *Catalog) Cached(ctx context.Context, id int64) (Voucher, error) {
	now := c.now()
	c.mu.Lock()
	cv, ok := c.cached[id]
	c.mu.Unlock()
	if ok && now.Sub(cv.fetched) < c.ttl {
		return cv.v, nil
	}
	v, err := c.store.Voucher(ctx, id)
	if err != nil {
		return Voucher{}, err
	}
	c.mu.Lock()
	c.cached[id] = cachedVoucher{v: v, fetched: now}
	c.mu.Unlock()
	return v, nil
}

// withLiveStock replaces the stock of seckill vouchers by the fast store's
// figure, which is the one shoppers race for.
func (c *Catalog) withLiveStock(ctx context.Context, vs []Voucher) ([]Voucher, error) {
	var ids []int64
	for _, v := range vs {
		if v.Kind == KindSeckill {
			ids = append(ids, v.ID)
		}
	}
	if len(ids) == 0 {
		return vs, nil
	}
	left, err := c.stock.StockLeft(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("%w: live stock: %w", ErrUnavailable, err)
	}
	for i, v := range vs {
		if n, ok := left[v.ID]; ok && v.Kind == KindSeckill {
			vs[i].StockLeft = n
		}
	}
	return vs, nil
}
