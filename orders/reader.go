package orders

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/orderid"
)

// DefaultListLimit is how many orders Reader.List returns at most.
const DefaultListLimit = 100

// ActiveVouchers lists the vouchers that can have live holds (seckill
// vouchers on sale or recently ended). It may answer from a copy, but only
// from one read from PostgreSQL at or after readSince (a zero readSince takes
// any recent copy): a voucher created before readSince is then in the list.
type ActiveVouchers func(ctx context.Context, readSince time.Time) ([]int64, error)

// clockSkew bounds how far apart the clocks of two instances may be: an order
// id's time (from the instance that gave it) plus clockSkew is later than the
// moment its voucher was created, on any instance's clock.
const clockSkew = time.Second

// Reader answers a shopper's order reads: PostgreSQL first, and for an order
// the workers have not persisted yet, its Redis hold as status reserved, so a
// client never gets 404 for an order id it was just given.
type Reader struct {
	store  Record
	holds  Stock
	active ActiveVouchers
	limit  int
	now    func() time.Time
}

// ReaderConfig is what NewReader builds a Reader from.
type ReaderConfig struct {
	// Record holds the persisted orders.
	Record Record
	// Stock holds the reservations not persisted yet.
	Stock Stock
	// Active lists the vouchers whose holds are looked at.
	Active ActiveVouchers
}

// NewReader returns a Reader.
func NewReader(cfg ReaderConfig) *Reader {
	return &Reader{store: cfg.Record, holds: cfg.Stock, active: cfg.Active, limit: DefaultListLimit, now: time.Now}
}

// Get returns the user's order id. An unknown order and someone else's order
// both return an error wrapping apperr.ErrNotFound.
func (r *Reader) Get(ctx context.Context, userID, orderID int64) (Order, error) {
	o, found, err := r.stored(ctx, userID, orderID)
	if err != nil || found {
		return o, err
	}
	hold, ok, err := r.hold(ctx, orderID, time.Time{})
	if err == nil && !ok {
		// The order id tells when it was given, and its voucher existed
		// before that: a list of vouchers read since then (allowing for
		// the clocks of two instances) has it. A voucher created after the
		// copy was read is otherwise unknown until the copy expires, and
		// its just-given orders would read as 404.
		if since, plausible := r.readSince(orderID); plausible {
			hold, ok, err = r.hold(ctx, orderID, since)
		}
	}
	if err != nil {
		return Order{}, err
	}
	if ok && hold.UserID == userID {
		return r.reserved(ctx, hold)
	}
	// The worker may have persisted (and Redis released, on failure) between
	// the two looks: PostgreSQL has the last word.
	o, found, err = r.stored(ctx, userID, orderID)
	if err != nil || found {
		return o, err
	}
	return Order{}, fmt.Errorf("orders: order %d: %w", orderID, apperr.ErrNotFound)
}

// hold looks orderID up among the vouchers that can hold stock, listed
// from a read made at or after since.
func (r *Reader) hold(ctx context.Context, orderID int64, since time.Time) (seckill.Reservation, bool, error) {
	vouchers, err := r.active(ctx, since)
	if err != nil {
		return seckill.Reservation{}, false, fmt.Errorf("orders: active vouchers: %w", err)
	}
	hold, ok, err := r.holds.Hold(ctx, orderID, vouchers)
	if err != nil {
		return seckill.Reservation{}, false, fmt.Errorf("orders: hold %d: %w", orderID, err)
	}
	return hold, ok, nil
}

// readSince is the moment a list of active vouchers must have been read at
// or after to include orderID's voucher: the id's time plus clockSkew, but
// never later than now (a list read now has every voucher created so far).
// An id from the future is no order of ours: ok is false and no fresh list
// is read for it.
func (r *Reader) readSince(orderID int64) (time.Time, bool) {
	at, _, _ := orderid.Parts(orderID)
	now := r.now()
	if at.After(now.Add(clockSkew)) {
		return time.Time{}, false
	}
	return minTime(at.Add(clockSkew), now), true
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// stored returns the user's order from PostgreSQL; someone else's order is
// ErrNotFound, never shown.
func (r *Reader) stored(ctx context.Context, userID, orderID int64) (Order, bool, error) {
	o, err := r.store.Order(ctx, orderID)
	switch {
	case errors.Is(err, apperr.ErrNotFound):
		return Order{}, false, nil
	case err != nil:
		return Order{}, false, fmt.Errorf("orders: order %d: %w", orderID, err)
	case o.UserID != userID:
		return Order{}, false, fmt.Errorf("orders: order %d: %w", orderID, apperr.ErrNotFound)
	}
	return o, true, nil
}

func (r *Reader) reserved(ctx context.Context, h seckill.Reservation) (Order, error) {
	price, err := r.price(ctx, h.VoucherID)
	if err != nil {
		return Order{}, err
	}
	return OrderFromReservation(h, price), nil
}

// price is the voucher's price for a reserved order's amount; a voucher
// PostgreSQL does not know (its order will fail) shows 0.
func (r *Reader) price(ctx context.Context, voucherID int64) (int64, error) {
	v, err := r.store.Voucher(ctx, voucherID)
	if err != nil && !errors.Is(err, apperr.ErrNotFound) {
		return 0, fmt.Errorf("orders: voucher %d: %w", voucherID, err)
	}
	return v.PriceCents, nil
}

// Page is one page of a shopper's orders (GET /api/v1/orders): newest first,
// by order id (ids are time-ordered), so a page is a seek from the last id
// of the one before.
type Page struct {
	// Before keeps only orders with a smaller id; 0 starts at the newest.
	Before int64
	// Status keeps only orders of that status; "" keeps all.
	Status Status
	// Limit is the most orders the page holds.
	Limit int
}

// Page returns one page of the user's orders, newest first: those in
// PostgreSQL and the live holds not persisted yet (status reserved), and
// whether more follow it.
func (r *Reader) Page(ctx context.Context, userID int64, p Page) ([]Order, bool, error) {
	if p.Limit <= 0 {
		return nil, false, fmt.Errorf("orders: page: %w: limit %d", apperr.ErrInvalidInput, p.Limit)
	}
	// One more than the page, to know whether another follows.
	want := p
	want.Limit++
	list, err := r.store.OrdersPage(ctx, userID, want)
	if err != nil {
		return nil, false, fmt.Errorf("orders: page: %w", err)
	}
	if p.Status == "" || p.Status == StatusReserved {
		if list, err = r.withHolds(ctx, userID, list); err != nil {
			return nil, false, err
		}
		kept := list[:0]
		for _, o := range list {
			if (p.Before <= 0 || o.ID < p.Before) && (p.Status == "" || o.Status == p.Status) {
				kept = append(kept, o)
			}
		}
		list = kept
	}
	more := len(list) > p.Limit
	if more {
		list = list[:p.Limit]
	}
	return list, more, nil
}

// List returns the user's orders, newest first (ids are time-ordered): those
// in PostgreSQL and the live holds not persisted yet, at most
// DefaultListLimit.
func (r *Reader) List(ctx context.Context, userID int64) ([]Order, error) {
	list, err := r.store.OrdersByUser(ctx, userID, r.limit)
	if err != nil {
		return nil, fmt.Errorf("orders: list: %w", err)
	}
	if list, err = r.withHolds(ctx, userID, list); err != nil {
		return nil, err
	}
	if len(list) > r.limit {
		list = list[:r.limit]
	}
	return list, nil
}

// withHolds adds to list, orders read from PostgreSQL, the user's live holds
// it lacks (an order not persisted yet, as status reserved), newest first.
func (r *Reader) withHolds(ctx context.Context, userID int64, list []Order) ([]Order, error) {
	vouchers, err := r.active(ctx, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("orders: active vouchers: %w", err)
	}
	if len(vouchers) == 0 {
		return list, nil
	}
	holds, err := r.holds.UserHolds(ctx, userID, vouchers)
	if err != nil {
		return nil, fmt.Errorf("orders: user holds: %w", err)
	}
	seen := make(map[int64]bool, len(list))
	for _, o := range list {
		seen[o.ID] = true
	}
	prices := map[int64]int64{}
	for _, h := range holds {
		if seen[h.OrderID] || h.UserID != userID {
			continue
		}
		seen[h.OrderID] = true
		// A persisted order stays held in Redis until released, and may be
		// older than the page read above: PostgreSQL still wins.
		o, err := r.store.Order(ctx, h.OrderID)
		switch {
		case err == nil:
			if o.UserID == userID {
				list = append(list, o)
			}
			continue
		case !errors.Is(err, apperr.ErrNotFound):
			return nil, fmt.Errorf("orders: order %d: %w", h.OrderID, err)
		}
		price, ok := prices[h.VoucherID]
		if !ok {
			if price, err = r.price(ctx, h.VoucherID); err != nil {
				return nil, err
			}
			prices[h.VoucherID] = price
		}
		list = append(list, OrderFromReservation(h, price))
	}
	slices.SortFunc(list, func(a, b Order) int { return cmp.Compare(b.ID, a.ID) })
	return list, nil
}
