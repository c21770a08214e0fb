package seckill

// The catalog's snapshots: immutable, shared by every reader, and what a
// voucher's copy in memory may decide on its own.

import (
	"fmt"
	"time"
)

// Same reports whether a and b show the same thing to a shopper (every
// field but CreatedAt, times compared as instants).
func (a Voucher) Same(b Voucher) bool {
	return a.ID == b.ID && a.Title == b.Title && a.Kind == b.Kind && a.PriceCents == b.PriceCents &&
		a.Currency == b.Currency &&
		a.StockTotal == b.StockTotal && a.StockLeft == b.StockLeft && a.PerUserLimit == b.PerUserLimit &&
		a.BeginAt.Equal(b.BeginAt) && a.EndAt.Equal(b.EndAt) && a.CaptchaRequired == b.CaptchaRequired &&
		a.ProofOfWork == b.ProofOfWork &&
		a.Paused == b.Paused && a.State == b.State && a.ShardCount() == b.ShardCount() &&
		equalPtr(a.WaitingRoom, b.WaitingRoom) && equalPtr(a.Draw, b.Draw)
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
