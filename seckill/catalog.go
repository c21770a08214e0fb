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
)

// VoucherStore is the record of vouchers (PostgreSQL).
type VoucherStore interface {
	// CreateVoucher stores v and calls beforeCommit with the stored voucher
	// inside the same transaction; the voucher exists only if both succeed.
	CreateVoucher(ctx context.Context, v Voucher, beforeCommit func(context.Context, Voucher) error) (Voucher, error)
	Voucher(ctx context.Context, id int64) (Voucher, error)
	Vouchers(ctx context.Context) ([]Voucher, error)
	// SetVoucherPaused records the operator's pause (or its end) and
	// returns the voucher, or an error wrapping ErrNotFound.
	SetVoucherPaused(ctx context.Context, id int64, paused bool) (Voucher, error)
}

// StockKeeper puts seckill vouchers on sale in the fast store and reads their
// live stock.
type StockKeeper interface {
	Warm(ctx context.Context, v Voucher) error
	Unwarm(ctx context.Context, voucherID int64) error
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// Announcer tells every instance's Catalog that a voucher's record changed
// (created, paused, resumed), so each reads it again at once instead of at
// its next periodic refresh (redisstock.Announcer implements it over Redis
// pub/sub; the receiving side calls Catalog.Changed).
type Announcer interface {
	AnnounceVoucher(ctx context.Context, voucherID int64) error
}

// Catalog is every voucher with its live stock and state, kept in memory so
// that reading it costs no database query per request (the README, "What
// holds": reads cost nothing per shopper).
//
// Two loops keep the memory fresh (Start):
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
// Without Start, the catalog refreshes lazily: a read finding the record
// older than RecordEvery reads it again (coalesced), which makes it a cache
// with a one-second life.
//
// While PostgreSQL is unavailable the last snapshot keeps being served (a
// stale catalog beats no catalog during a sale, and the buying path's
// authority is the reservation script, not this copy); only an id never
// seen is answered ErrUnavailable then.
type Catalog struct {
	store    VoucherStore
	stock    StockKeeper
	announce Announcer
	now      func() time.Time
	log      *slog.Logger

	recordEvery time.Duration
	stockEvery  time.Duration
	lookupGap   time.Duration
	readTimeout time.Duration

	cur       atomic.Pointer[CatalogSnapshot]
	records   atomic.Int64 // reads of the record, for tests and metrics
	kick      chan struct{}
	stockKick chan struct{}
	stop      context.CancelFunc
	wg        sync.WaitGroup

	mu        sync.Mutex
	rows      []Voucher       // the last record read, newest first
	live      map[int64]int64 // the last live stock read, by voucher
	flight    *recordRead     // the read of the record in progress
	lastStart time.Time       // when the last finished read of the record began
	lastErr   error           // how it ended
	readOnce  bool            // a read of the record has succeeded
	stale     bool            // the last read failed (logged once per outage)
	running   bool
}

// recordRead is one read of the record that any number of callers share.
type recordRead struct {
	started time.Time
	done    chan struct{}
	err     error
}

// CatalogOption changes how NewCatalog builds a Catalog.
type CatalogOption func(*Catalog)

// WithCatalogLogger sets where the Catalog logs (slog.Default() otherwise).
func WithCatalogLogger(log *slog.Logger) CatalogOption {
	return func(c *Catalog) { c.log = log }
}

// WithAnnouncer makes Create and SetState tell the fleet (nil: only this
// instance learns at once; the others at their next periodic refresh).
func WithAnnouncer(a Announcer) CatalogOption {
	return func(c *Catalog) { c.announce = a }
}

// WithStockEvery sets how often the live stock is read (default 100ms).
func WithStockEvery(d time.Duration) CatalogOption {
	return func(c *Catalog) {
		if d > 0 {
			c.stockEvery = d
		}
	}
}

// WithLookupGap sets how long a read of the record answers for ids it did
// not find (default 250ms).
func WithLookupGap(d time.Duration) CatalogOption {
	return func(c *Catalog) {
		if d > 0 {
			c.lookupGap = d
		}
	}
}

// Defaults of the catalog's refreshes.
const (
	DefaultStockEvery = 100 * time.Millisecond
	DefaultLookupGap  = 250 * time.Millisecond
	// ClockMargin is how far this instance's clock may be from the
	// reservation script's (Redis TIME) before the memory refuses a buy as
	// not started or ended: within it, the script decides.
	ClockMargin = time.Second
)

// NewCatalog returns a Catalog over the record and the fast store.
// recordEvery is how often the record is read again as a safety net (and
// how old a lazily refreshed catalog may be); 1s keeps every change within a
// second on every instance even when an announcement is lost.
func NewCatalog(store VoucherStore, stock StockKeeper, recordEvery time.Duration, opts ...CatalogOption) *Catalog {
	if recordEvery <= 0 {
		recordEvery = time.Second
	}
	c := &Catalog{
		store: store, stock: stock, now: time.Now, log: slog.Default(),
		recordEvery: recordEvery, stockEvery: DefaultStockEvery, lookupGap: DefaultLookupGap,
		readTimeout: 5 * time.Second,
		kick:        make(chan struct{}, 1), stockKick: make(chan struct{}, 1),
		live: make(map[int64]int64),
	}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Start reads the record once (an error is logged: the loop retries) and
// runs the refresh loops until Stop or ctx ends.
func (c *Catalog) Start(ctx context.Context) {
	ctx, c.stop = context.WithCancel(ctx)
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	_ = c.reload(ctx, c.now())
	c.wg.Go(func() { c.loop(ctx) })
}

// Stop ends the loops and waits for them.
func (c *Catalog) Stop() {
	if c.stop != nil {
		c.stop()
	}
	c.wg.Wait()
	c.mu.Lock()
	c.running = false
	c.mu.Unlock()
}

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
// this instance lists it before Create returns.
func (c *Catalog) Create(ctx context.Context, v Voucher) (Voucher, error) {
	v.StockLeft = v.StockTotal
	v.Paused = false
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
	created := c.now()
	c.changedHere(ctx, stored.ID)
	// This instance lists it before answering, so the operator's next
	// read (and a buy right after) finds it here at once. A failed read
	// changes nothing: the voucher exists, and the loop reads again.
	_ = c.reload(ctx, created)
	stored.State = stored.StateAt(c.now())
	return stored, nil
}

// SetState pauses a voucher (StatePaused) or ends its pause (StateOnSale),
// in the record first, then tells the fleet. It returns the voucher as this
// instance's memory has it once a read begun after the change finished, so
// its State is what shoppers now see (on_sale, or scheduled, sold_out or
// ended when that is where the sale stands).
func (c *Catalog) SetState(ctx context.Context, id int64, st State) (Voucher, error) {
	var paused bool
	switch st {
	case StatePaused:
		paused = true
	case StateOnSale:
	default:
		return Voucher{}, Invalidf("state must be %q or %q", StatePaused, StateOnSale)
	}
	if _, err := c.store.SetVoucherPaused(ctx, id, paused); err != nil {
		return Voucher{}, err
	}
	changed := c.now()
	c.changedHere(ctx, id)
	if err := c.reload(ctx, changed); err != nil {
		return Voucher{}, err
	}
	v, ok := c.cur.Load().Voucher(id)
	if !ok {
		return Voucher{}, fmt.Errorf("voucher %d: %w", id, ErrNotFound)
	}
	return v, nil
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
		err = fmt.Errorf("%w: the catalog has not been read yet", ErrUnavailable)
	}
	return nil, err
}

// Voucher returns one voucher from memory. An id the memory does not know
// is looked up by a read of the record that begins after the call did, so a
// voucher committed on another instance before the call is never answered
// ErrNotFound (a shopper who saw it on the page can buy it at once). Reads
// for unknown ids start at most once per LookupGap and are shared by every
// caller waiting then: a flood of unknown ids waits up to LookupGap each and
// costs the record at most one query per LookupGap. Still unknown after that
// read, the id is ErrNotFound.
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
	return Voucher{}, fmt.Errorf("voucher %d: %w", id, ErrNotFound)
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

// awaitLookupTurn waits until LookupGap has passed since the last read of
// the record began, so lookups of unknown ids are paced.
func (c *Catalog) awaitLookupTurn(ctx context.Context) error {
	c.mu.Lock()
	never, wait := c.lastStart.IsZero(), c.lookupGap-c.now().Sub(c.lastStart)
	c.mu.Unlock()
	if never || wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the catalog: %w", ErrUnavailable, ctx.Err())
	}
}

// reload makes sure a read of the record that began at or after since has
// finished, and returns how it ended. Callers share reads: one that is in
// flight serves every caller whose since it satisfies; an older one is
// waited for and followed by a new one. The read itself runs without the
// caller's cancellation (others may be waiting on it), within readTimeout.
func (c *Catalog) reload(ctx context.Context, since time.Time) error {
	for {
		c.mu.Lock()
		f := c.flight
		if f == nil && !c.lastStart.IsZero() && !c.lastStart.Before(since) {
			err := c.lastErr
			c.mu.Unlock()
			return err
		}
		if f == nil {
			f = &recordRead{started: c.now(), done: make(chan struct{})}
			c.flight = f
			c.mu.Unlock()
			f.err = c.readRecord(context.WithoutCancel(ctx))
			c.mu.Lock()
			c.flight, c.lastStart, c.lastErr = nil, f.started, f.err
			c.mu.Unlock()
			close(f.done)
			return f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the catalog: %w", ErrUnavailable, ctx.Err())
		}
		if !f.started.Before(since) {
			return f.err
		}
	}
}

// readRecord reads every voucher from the record and the live stock of the
// seckill ones, and publishes the result.
func (c *Catalog) readRecord(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	c.records.Add(1)
	rows, err := c.store.Vouchers(ctx)
	if err != nil {
		c.mu.Lock()
		first := !c.stale
		c.stale = true
		c.mu.Unlock()
		if first {
			c.log.WarnContext(ctx, "voucher record unavailable; serving the last catalog until it answers", "err", err)
		}
		if !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: catalog: %w", ErrUnavailable, err)
		}
		return err
	}
	left, lerr := c.stock.StockLeft(ctx, seckillIDs(rows, time.Time{})...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale {
		c.stale = false
		c.log.InfoContext(ctx, "voucher record answers again; catalog refreshed")
	}
	c.rows, c.readOnce = rows, true
	if lerr == nil {
		c.live = left
	}
	c.publish()
	return nil
}

// refreshStock reads the live stock of the seckill vouchers not yet ended
// and publishes it. A failure keeps the last figures (the reservation is
// the judge of stock; the catalog only shows it).
func (c *Catalog) refreshStock(ctx context.Context) {
	c.mu.Lock()
	ids := seckillIDs(c.rows, c.now().Add(-ClockMargin))
	c.mu.Unlock()
	if len(ids) == 0 {
		c.mu.Lock()
		c.publish() // states move with the clock
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.stockEvery*5)
	defer cancel()
	left, err := c.stock.StockLeft(ctx, ids...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		for id, n := range left {
			c.live[id] = n
		}
	}
	c.publish()
}

// seckillIDs are the ids of the seckill vouchers among rows whose sale ends
// after endsAfter.
func seckillIDs(rows []Voucher, endsAfter time.Time) []int64 {
	var ids []int64
	for _, v := range rows {
		if v.Kind == KindSeckill && v.EndAt.After(endsAfter) {
			ids = append(ids, v.ID)
		}
	}
	return ids
}

// publish builds the catalog from the last record and live stock, with the
// states of now, and makes it current if anything differs. Callers hold mu.
func (c *Catalog) publish() {
	now := c.now()
	vs := make([]Voucher, len(c.rows))
	for i, v := range c.rows {
		if n, ok := c.live[v.ID]; ok && v.Kind == KindSeckill {
			v.StockLeft = n
		}
		v.State = v.StateAt(now)
		vs[i] = v
	}
	cur := c.cur.Load()
	if cur == nil {
		c.cur.Store(NewCatalogSnapshot(vs, now))
		return
	}
	if slices.EqualFunc(cur.vouchers, vs, Voucher.Same) {
		return
	}
	c.cur.Store(cur.Next(vs, now))
}

// Same reports whether a and b show the same thing to a shopper (every
// field but CreatedAt, times compared as instants).
func (a Voucher) Same(b Voucher) bool {
	return a.ID == b.ID && a.Title == b.Title && a.Kind == b.Kind && a.PriceCents == b.PriceCents &&
		a.StockTotal == b.StockTotal && a.StockLeft == b.StockLeft && a.PerUserLimit == b.PerUserLimit &&
		a.BeginAt.Equal(b.BeginAt) && a.EndAt.Equal(b.EndAt) && a.CaptchaRequired == b.CaptchaRequired &&
		a.Paused == b.Paused && a.State == b.State && a.ShardCount() == b.ShardCount() &&
		equalPtr(a.WaitingRoom, b.WaitingRoom)
}

// equalPtr reports whether a and b are both nil or point at equal values.
func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// CatalogSnapshot is the catalog at one moment: immutable, shared by every
// reader. Its version grows by one with each change, and Superseded is
// closed when a newer snapshot replaces it.
type CatalogSnapshot struct {
	version  uint64
	at       time.Time
	vouchers []Voucher
	byID     map[int64]int
	done     chan struct{}
}

// NewCatalogSnapshot returns version 1 of a catalog of vs (newest first),
// whose states are computed at at where a voucher has none.
func NewCatalogSnapshot(vs []Voucher, at time.Time) *CatalogSnapshot {
	return newSnapshot(1, vs, at)
}

func newSnapshot(version uint64, vs []Voucher, at time.Time) *CatalogSnapshot {
	s := &CatalogSnapshot{version: version, at: at, vouchers: vs, byID: make(map[int64]int, len(vs)), done: make(chan struct{})}
	for i := range vs {
		if vs[i].State == "" {
			vs[i].State = vs[i].StateAt(at)
		}
		s.byID[vs[i].ID] = i
	}
	return s
}

// Next returns the snapshot that follows s, with vs, and closes s's
// Superseded channel. Call it once per snapshot.
func (s *CatalogSnapshot) Next(vs []Voucher, at time.Time) *CatalogSnapshot {
	n := newSnapshot(s.version+1, vs, at)
	close(s.done)
	return n
}

// Version grows by one with each change of the catalog.
func (s *CatalogSnapshot) Version() uint64 { return s.version }

// At is when the snapshot was built (its states are of that moment).
func (s *CatalogSnapshot) At() time.Time { return s.at }

// Vouchers are every voucher, newest first. The slice is shared: read only.
func (s *CatalogSnapshot) Vouchers() []Voucher { return s.vouchers }

// Voucher returns voucher id, if the catalog has it.
func (s *CatalogSnapshot) Voucher(id int64) (Voucher, bool) {
	i, ok := s.byID[id]
	if !ok {
		return Voucher{}, false
	}
	return s.vouchers[i], true
}

// Superseded is closed once a newer snapshot replaced this one.
func (s *CatalogSnapshot) Superseded() <-chan struct{} { return s.done }

// CertainRefusal says, from a voucher's copy in memory, why a buy of it is
// certainly useless now, or nil when the reservation must decide. Only what
// cannot be wrong is refused: a pause (the operator's; retried later), a
// sale that has not begun or has ended by more than ClockMargin on this
// instance's clock (the script judges the window by Redis' clock), and a
// seckill voucher with no stock left. A buy that may be the replay of an
// earlier one (it carries a request key) is never refused as ended or sold
// out: its first order must be answered, and the script knows it.
func CertainRefusal(v Voucher, now time.Time, mayReplay bool) error {
	switch {
	case v.Paused && now.Before(v.EndAt):
		return fmt.Errorf("%w: voucher %d", ErrSalePaused, v.ID)
	case now.Add(ClockMargin).Before(v.BeginAt):
		return fmt.Errorf("%w: voucher %d", ErrNotStarted, v.ID)
	case mayReplay:
		return nil
	case !now.Add(-ClockMargin).Before(v.EndAt):
		return fmt.Errorf("%w: voucher %d", ErrEnded, v.ID)
	case v.Kind == KindSeckill && v.StockLeft <= 0:
		return fmt.Errorf("%w: voucher %d", ErrSoldOut, v.ID)
	}
	return nil
}
