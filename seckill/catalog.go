package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	log   *slog.Logger

	mu     sync.Mutex
	cached map[int64]cachedVoucher
}

type cachedVoucher struct {
	v Voucher
	// fetched is when v was read, or when a refresh last failed: the next
	// refresh is tried ttl after it either way.
	fetched time.Time
	// stale is set while refreshes fail, so the outage is logged once per
	// voucher rather than once per ttl.
	stale bool
}

// CatalogOption changes how NewCatalog builds a Catalog.
type CatalogOption func(*Catalog)

// WithCatalogLogger sets where the Catalog logs (slog.Default() otherwise).
func WithCatalogLogger(log *slog.Logger) CatalogOption {
	return func(c *Catalog) { c.log = log }
}

// NewCatalog returns a Catalog over the record and the fast store. ttl bounds
// how stale the buying path's copy of a voucher may be while the record
// answers; while it is unavailable, the last copy is served (see Cached).
func NewCatalog(store VoucherStore, stock StockKeeper, ttl time.Duration, opts ...CatalogOption) *Catalog {
	c := &Catalog{store: store, stock: stock, ttl: ttl, now: time.Now, log: slog.Default(), cached: make(map[int64]cachedVoucher)}
	for _, opt := range opts {
		opt(c)
	}
	return c
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
//
// When the record is unavailable (ErrUnavailable), the last copy is served
// however old it is, and the refresh is tried again only ttl later: the
// seckill buying path runs on Redis and Kafka, and a PostgreSQL outage must
// not fail every buy of a voucher it has seen, nor send each of them to wait
// on PostgreSQL. A voucher never fetched still returns the error.
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
		if !ok || !errors.Is(err, ErrUnavailable) {
			return Voucher{}, err
		}
		return c.keepStale(ctx, id, now, err), nil
	}
	c.mu.Lock()
	c.cached[id] = cachedVoucher{v: v, fetched: now}
	c.mu.Unlock()
	return v, nil
}

// keepStale returns the cached copy of voucher id after a refresh at now
// failed with err, and puts the next refresh ttl later. A copy another
// caller stored meanwhile is served as it is.
func (c *Catalog) keepStale(ctx context.Context, id int64, now time.Time, err error) Voucher {
	c.mu.Lock()
	cv := c.cached[id]
	first := false
	if cv.fetched.Before(now) {
		first = !cv.stale
		cv.fetched, cv.stale = now, true
		c.cached[id] = cv
	}
	c.mu.Unlock()
	if first {
		c.log.DebugContext(ctx, "voucher record unavailable; serving the last copy until it answers",
			"voucher_id", id, "err", err)
	}
	return cv.v
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
