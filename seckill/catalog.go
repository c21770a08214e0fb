package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
)

// VoucherStore is the record of vouchers (PostgreSQL).
type VoucherStore interface {
	// CreateVoucher stores v and calls beforeCommit with the stored voucher
	// inside the same transaction; the voucher exists only if both succeed.
	// act, when not nil, is appended to the operators' trail in that
	// transaction, the new voucher its target (a used Idempotency-Key:
	// ErrKeyUsed, and nothing is stored).
	CreateVoucher(ctx context.Context, v Voucher, act *Action, beforeCommit func(context.Context, Voucher) error) (Voucher, error)
	Voucher(ctx context.Context, id int64) (Voucher, error)
	Vouchers(ctx context.Context) ([]Voucher, error)
	// SetVoucherPaused records the operator's pause (or its end) and
	// returns the voucher, or an error wrapping apperr.ErrNotFound; act,
	// when not nil, is appended to the trail in the same transaction.
	SetVoucherPaused(ctx context.Context, id int64, paused bool, act *Action) (Voucher, error)
	// ChangeVoucher makes change (Change.Apply, judged by the record's
	// clock) with the voucher's row locked, records it (a ChangeRecord,
	// and act in the trail when not nil), calls beforeCommit with the
	// voucher before and after it inside the same transaction, and commits
	// only if that returned nil.
	ChangeVoucher(ctx context.Context, id int64, change Change, act *Action,
		beforeCommit func(ctx context.Context, before, after Voucher) error) (Voucher, error)
	// VoucherChanges lists the changes made to voucher id, oldest first
	// (none for an unknown voucher).
	VoucherChanges(ctx context.Context, id int64) ([]ChangeRecord, error)
}

// StockKeeper puts seckill vouchers on sale in the fast store and reads their
// live stock.
type StockKeeper interface {
	Warm(ctx context.Context, v Voucher) error
	Unwarm(ctx context.Context, voucherID int64) error
	// Steer makes a voucher on sale what after says where it differs from
	// before: its stock and total grow by the difference of the totals
	// (shrink, to undo a change: never below what is left), and its end
	// and the expiry of its state move with EndAt.
	Steer(ctx context.Context, before, after Voucher) error
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// DrawFaces reads the public faces of vouchers' draws (seckill/draw.Store
// implements it); a voucher whose entries have not opened is left out.
type DrawFaces interface {
	DrawFaces(ctx context.Context, voucherIDs ...int64) (map[int64]DrawFace, error)
}

// Announcer tells every instance's Catalog that a voucher's record changed
// (created, paused, resumed), so each reads it again at once instead of at
// its next periodic refresh (redisstock.Announcer implements it over Redis
// pub/sub; the receiving side calls Catalog.Changed).
type Announcer interface {
	AnnounceVoucher(ctx context.Context, voucherID int64) error
}

// Catalog is every voucher with its live stock and state, kept in memory so
// that reading it costs no database query per request (seckill/RULES.md, "What
// holds": reads cost nothing per shopper).
//
// Two refreshes keep the memory fresh while Run runs:
//   - the record: every vouchers row, one query to PostgreSQL every
//     RecordEvery (default 1s), and at once when Changed is called (a
//     creation or a pause announced by any instance);
//   - the live stock of the seckill vouchers still on sale: one pipelined
//     Redis round trip every StockEvery (default 100ms), and at once when
//     StockChanged is called (stock came back somewhere in the fleet).
//
// Each refresh that changes anything publishes a new immutable
// CatalogSnapshot; readers take the current one with an atomic load. Reads
// of the record are coalesced: however many requests wait, one query runs at
// a time, and a request for an id the memory does not know (a voucher just
// created on another instance whose announcement has not arrived) shares a
// read that began at most LookupGap before it, so a flood of unknown ids
// costs at most one query per LookupGap, not one per request.
//
// Without Run, the catalog refreshes lazily: a read finding the record
// older than RecordEvery reads it again (coalesced), which makes it a cache
// with a one-second life.
//
// While PostgreSQL is unavailable the last snapshot keeps being served (a
// stale catalog beats no catalog during a sale, and the buying path's
// authority is the reservation script, not this copy); only an id never
// seen is answered apperr.ErrUnavailable then.
type Catalog struct {
	store    VoucherStore
	stock    StockKeeper
	draws    DrawFaces
	announce Announcer
	now      func() time.Time
	log      *slog.Logger
	// currency is a voucher's when its record names none.
	currency string

	recordEvery time.Duration
	stockEvery  time.Duration
	lookupGap   time.Duration
	readTimeout time.Duration

	cur       atomic.Pointer[CatalogSnapshot]
	records   atomic.Int64 // reads of the record, for tests and metrics
	kick      chan struct{}
	stockKick chan struct{}
	ready     chan struct{}

	mu        sync.Mutex
	rows      []Voucher          // the last record read, newest first
	live      map[int64]int64    // the last live stock read, by voucher
	faces     map[int64]DrawFace // the last draws read, by voucher
	flight    *recordRead        // the read of the record in progress
	lastStart time.Time          // when the last finished read of the record began
	lastErr   error              // how it ended
	readOnce  bool               // a read of the record has succeeded
	stale     bool               // the last read failed (logged once per outage)
	running   bool               // Run is keeping the memory fresh
	ran       bool               // Run was called
}

// recordRead is one read of the record that any number of callers share.
type recordRead struct {
	started time.Time
	done    chan struct{}
	err     error
}

// CatalogConfig is what NewCatalog builds a Catalog from; a zero field means
// its default.
type CatalogConfig struct {
	// Store is the record of vouchers (PostgreSQL).
	Store VoucherStore
	// Stock puts seckill vouchers on sale and reads their live stock.
	Stock StockKeeper
	// Draws, when set, reads the draws' faces with the live stock, for
	// the vouchers sold by draw.
	Draws DrawFaces
	// Announcer makes Create and SetState tell the fleet (nil: only this
	// instance learns at once; the others at their next periodic refresh).
	Announcer Announcer
	// RecordEvery is how often the record is read again as a safety net,
	// and how old a catalog that is not running may be (default 1s, which
	// keeps every change within a second on every instance even when an
	// announcement is lost).
	RecordEvery time.Duration
	// StockEvery is how often the live stock is read (DefaultStockEvery).
	StockEvery time.Duration
	// LookupGap is how long a read of the record answers for ids it did
	// not find (DefaultLookupGap).
	LookupGap time.Duration
	// Log gets the record's outages (slog.Default() when nil).
	Log *slog.Logger
	// Currency is the configured currency (SECKILL_CURRENCY;
	// DefaultCurrency when empty): a new voucher's when its operator names
	// none, and the one of vouchers recorded before vouchers carried one.
	Currency string
}

// Defaults of the catalog's refreshes.
const (
	DefaultRecordEvery = time.Second
	DefaultStockEvery  = 100 * time.Millisecond
	DefaultLookupGap   = 250 * time.Millisecond
	// ClockMargin is how far this instance's clock may be from the
	// reservation script's (Redis TIME) before the memory refuses a buy as
	// not started or ended: within it, the script decides.
	ClockMargin = time.Second
)

// NewCatalog returns a Catalog over cfg.Store and cfg.Stock. It starts
// nothing: Run does.
func NewCatalog(cfg CatalogConfig) *Catalog {
	positive := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	currency := cfg.Currency
	if currency == "" {
		currency = DefaultCurrency
	}
	return &Catalog{
		currency: currency,
		store:    cfg.Store, stock: cfg.Stock, draws: cfg.Draws, announce: cfg.Announcer, now: time.Now, log: log,
		recordEvery: positive(cfg.RecordEvery, DefaultRecordEvery),
		stockEvery:  positive(cfg.StockEvery, DefaultStockEvery),
		lookupGap:   positive(cfg.LookupGap, DefaultLookupGap),
		readTimeout: 5 * time.Second,
		kick:        make(chan struct{}, 1), stockKick: make(chan struct{}, 1),
		ready: make(chan struct{}),
		live:  make(map[int64]int64), faces: make(map[int64]DrawFace),
	}
}

// Run reads the record once (an error is logged: the loop retries), closes
// Ready, and keeps the memory fresh until ctx ends; then it returns nil.
// Call it once.
func (c *Catalog) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("seckill: the catalog's Run was called twice")
	}
	c.ran, c.running = true, true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	_ = c.reload(ctx, c.now())
	close(c.ready)
	c.loop(ctx)
	return nil
}

// Ready is closed once Run has read the record for the first time (or
// tried): the catalog routes may answer from memory from then on.
func (c *Catalog) Ready() <-chan struct{} { return c.ready }

func (c *Catalog) loop(ctx context.Context) {
	record := time.NewTicker(c.recordEvery)
	defer record.Stop()
	stock := time.NewTicker(c.stockEvery)
	defer stock.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-record.C:
			_ = c.reload(ctx, c.now())
		case <-c.kick:
			_ = c.reload(ctx, c.now())
		case <-stock.C:
			c.refreshStock(ctx)
		case <-c.stockKick:
			c.refreshStock(ctx)
		}
	}
}

// Changed asks for the record to be read again at once (a voucher was
// created, paused or resumed somewhere in the fleet). It never blocks; many
// calls before the read make one read.
func (c *Catalog) Changed(int64) {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// StockChanged asks for the live stock to be read again at once (stock came
// back somewhere in the fleet). It never blocks.
func (c *Catalog) StockChanged(int64) {
	select {
	case c.stockKick <- struct{}{}:
	default:
	}
}

// RecordReads is how many times the record (PostgreSQL) was read: each is
// one query, whatever the number of requests served meanwhile.
func (c *Catalog) RecordReads() int64 { return c.records.Load() }

// Create validates and stores a voucher. A seckill voucher is warmed in the
// fast store inside the record's transaction, so the two never disagree: if
// warming fails, nothing is stored and the error says the fast store is
// unavailable. The fleet is told, so every instance lists it within
// milliseconds (or at its next refresh if the announcement is lost), and
// this instance lists it before Create returns. act, when not nil, is the
// operator's creation, recorded in the trail with the voucher.
func (c *Catalog) Create(ctx context.Context, v Voucher, act *Action) (Voucher, error) {
	v.StockLeft = v.StockTotal
	v.Paused = false
	// The configured currency is written down with the voucher, so a
	// later change of the setting moves no price.
	v.Currency = v.CurrencyOr(c.currency)
	if err := v.Validate(); err != nil {
		return Voucher{}, err
	}
	var warmed int64 // the id put on sale in the fast store, if any
	warm := func(ctx context.Context, stored Voucher) error {
		if stored.Kind != KindSeckill {
			return nil
		}
		if err := c.stock.Warm(ctx, stored); err != nil {
			return fmt.Errorf("%w: voucher not created, its stock could not be put on sale: %w", apperr.ErrUnavailable, err)
		}
		warmed = stored.ID
		return nil
	}
	stored, err := c.store.CreateVoucher(ctx, v, act, warm)
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
	created := c.now()
	c.changedHere(ctx, stored.ID)
	// This instance lists it before answering, so the operator's next
	// read (and a buy right after) finds it here at once. A failed read
	// changes nothing: the voucher exists, and the loop reads again.
	_ = c.reload(ctx, created)
	stored.State = stored.StateAt(c.now())
	stored.Currency = stored.CurrencyOr(c.currency)
	return stored, nil
}

// SetState pauses a voucher (StatePaused) or ends its pause (StateOnSale),
// in the record first, then tells the fleet. It returns the voucher as this
// instance's memory has it once a read begun after the change finished, so
// its State is what shoppers now see (on_sale, or scheduled, sold_out or
// ended when that is where the sale stands). act, when not nil, is the
// operator's change, recorded in the trail with it.
func (c *Catalog) SetState(ctx context.Context, id int64, st State, act *Action) (Voucher, error) {
	var paused bool
	switch st {
	case StatePaused:
		paused = true
	case StateOnSale:
	default:
		return Voucher{}, apperr.InvalidField("/state", "state must be %q or %q", StatePaused, StateOnSale)
	}
	stored, err := c.store.SetVoucherPaused(ctx, id, paused, act)
	if err != nil {
		return Voucher{}, err
	}
	return c.afterChange(ctx, stored), nil
}

// Change steers a running sale (see Change): the record first, with the
// fast store changed inside its transaction (a seckill voucher's stock is
// added in Redis while the voucher's row is locked, so the two never
// disagree once it commits; if the commit fails the Redis change is undone).
// inTx, when not nil, runs last inside the transaction too, with the
// voucher as the change leaves it (a waiting room reopened for the stock
// added): its failure undoes the change, so nothing the change needs is
// left to do once it has committed. act, when not nil, is the operator's
// change, recorded in the trail with it. The fleet is told, as for
// SetState, and the voucher is returned as this instance's memory has it
// once a read begun after the change finished.
func (c *Catalog) Change(ctx context.Context, id int64, change Change, act *Action,
	inTx func(ctx context.Context, after Voucher) error) (Voucher, error) {
	if err := change.Validate(); err != nil {
		return Voucher{}, err
	}
	var steered bool
	var before, after Voucher
	steer := func(ctx context.Context, b, a Voucher) error {
		if b.Kind == KindSeckill {
			if err := c.stock.Steer(ctx, b, a); err != nil {
				return fmt.Errorf("voucher %d not changed, its stock in the fast store could not be: %w", id, err)
			}
			steered, before, after = true, b, a
		}
		if inTx != nil {
			return inTx(ctx, a)
		}
		return nil
	}
	stored, err := c.store.ChangeVoucher(ctx, id, change, act, steer)
	if err != nil && steered {
		if undoErr := c.stock.Steer(context.WithoutCancel(ctx), after, before); undoErr != nil {
			c.log.ErrorContext(ctx, "voucher change not committed, and its Redis side not undone: the healer repairs the drift",
				"voucher_id", id, "err", err, "undo_err", undoErr)
		}
	}
	if err != nil {
		return Voucher{}, err
	}
	return c.afterChange(ctx, stored), nil
}

// Changes lists the changes operators made to voucher id's running sale,
// oldest first, from the record: an operator's read, one query each.
func (c *Catalog) Changes(ctx context.Context, id int64) ([]ChangeRecord, error) {
	return c.store.VoucherChanges(ctx, id)
}

// afterChange tells the fleet that stored's record changed and returns
// the voucher as this instance's memory has it once a read begun after the
// change finished. The change has committed by then, so it never fails:
// an answer of error would make the operator send again a change that was
// made. When the memory cannot be read again now, the answer is the
// voucher as the record returned it (PostgreSQL's stock left, which may
// lag Redis's by the holds in flight), and the loop catches up.
func (c *Catalog) afterChange(ctx context.Context, stored Voucher) Voucher {
	changed := c.now()
	c.changedHere(ctx, stored.ID)
	err := c.reload(ctx, changed)
	if err == nil {
		if v, ok := c.cur.Load().Voucher(stored.ID); ok {
			return v
		}
		err = errors.New("not in the catalog read after it")
	}
	c.log.WarnContext(ctx, "voucher changed, but this instance could not read it again: answered with the record's copy; the catalog catches up at its next refresh",
		"voucher_id", stored.ID, "err", err)
	stored.State = stored.StateAt(c.now())
	stored.Currency = stored.CurrencyOr(c.currency)
	return stored
}

// changedHere tells the fleet, and this instance's loop, that voucher id's
// record changed. A lost announcement costs the others at most one
// periodic refresh.
func (c *Catalog) changedHere(ctx context.Context, id int64) {
	c.Changed(id)
	if c.announce == nil {
		return
	}
	if err := c.announce.AnnounceVoucher(context.WithoutCancel(ctx), id); err != nil {
		c.log.WarnContext(ctx, "voucher change not announced; other instances see it at their next refresh (within a second)",
			"voucher_id", id, "err", err)
	}
}

// Snapshot returns the catalog as this instance knows it. Without the loop
// (or when it has not read the record for two periods), it reads the record
// first, shared with every concurrent caller. It fails only when no read of
// the record ever succeeded.
func (c *Catalog) Snapshot(ctx context.Context) (*CatalogSnapshot, error) {
	s := c.cur.Load()
	now := c.now()
	c.mu.Lock()
	fresh := c.readOnce && (c.running || now.Sub(c.lastStart) < c.recordEvery)
	c.mu.Unlock()
	if s != nil && fresh {
		return s, nil
	}
	err := c.reload(ctx, now.Add(-c.recordEvery))
	if s = c.cur.Load(); s != nil {
		return s, nil // the last copy, however old, while the record is down
	}
	if err == nil {
		err = fmt.Errorf("%w: the catalog has not been read yet", apperr.ErrUnavailable)
	}
	return nil, err
}

// Voucher returns one voucher from memory. An id the memory does not know
// is looked up by a read of the record that begins after the call did, so a
// voucher committed on another instance before the call is never answered
// apperr.ErrNotFound (a shopper who saw it on the page can buy it at once). Reads
// for unknown ids start at most once per LookupGap and are shared by every
// caller waiting then: a flood of unknown ids waits up to LookupGap each and
// costs the record at most one query per LookupGap. Still unknown after that
// read, the id is apperr.ErrNotFound.
func (c *Catalog) Voucher(ctx context.Context, id int64) (Voucher, error) {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return Voucher{}, err
	}
	if v, ok := s.Voucher(id); ok {
		return v, nil
	}
	asked := c.now()
	if err := c.awaitLookupTurn(ctx); err != nil {
		return Voucher{}, err
	}
	if err := c.reload(ctx, asked); err != nil {
		return Voucher{}, err
	}
	if v, ok := c.cur.Load().Voucher(id); ok {
		return v, nil
	}
	return Voucher{}, fmt.Errorf("voucher %d: %w", id, apperr.ErrNotFound)
}

// Get returns one voucher with its live stock, from memory (see Voucher).
func (c *Catalog) Get(ctx context.Context, id int64) (Voucher, error) { return c.Voucher(ctx, id) }

// Cached returns one voucher for the buying path, from memory (see Voucher).
func (c *Catalog) Cached(ctx context.Context, id int64) (Voucher, error) {
	return c.Voucher(ctx, id)
}

// List returns every voucher with its live stock, newest first, from memory.
func (c *Catalog) List(ctx context.Context) ([]Voucher, error) {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Clone(s.Vouchers()), nil
}
