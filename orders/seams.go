package orders

import (
	"context"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/hoard"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Strikes counts holds their shoppers let expire unpaid or cancelled
// (seckill/hoard.Store implements it).
type Strikes interface {
	Record(ctx context.Context, strikes ...hoard.Strike) error
}

// Record is the order record in PostgreSQL (orders/pgstore.Store implements
// it): every read and write of it this package makes.
type Record interface {
	// PersistBatch turns reservations into orders in one transaction,
	// idempotently; see pgstore.Store.PersistBatch.
	PersistBatch(ctx context.Context, rs []seckill.Reservation, payTimeout time.Duration) (BatchResult, error)
	// BuySync sells a limit or common voucher in one transaction.
	BuySync(ctx context.Context, orderID int64, req seckill.BuyRequest, payTimeout time.Duration) (Order, error)
	// InsertFailed stores r as a failed order with its release owed, unless
	// an order with its id exists (inserted false: nothing may be released).
	InsertFailed(ctx context.Context, r seckill.Reservation) (Order, bool, error)

	// Pay marks the user's created order paid if its deadline has not
	// passed: ErrNotFound for an unknown or someone else's order, the order
	// with ErrAlready when it is paid already, ErrConflict for any other
	// state. One transaction, like every transition below.
	Pay(ctx context.Context, userID, orderID int64) (Order, error)
	// Cancel cancels the user's created order and puts its stock back in
	// PostgreSQL, flagging the Redis release (errors as for Pay).
	Cancel(ctx context.Context, userID, orderID int64) (Order, error)
	// CancelExpired cancels up to max created orders past their deadline,
	// like Cancel, claiming rows with FOR UPDATE SKIP LOCKED.
	CancelExpired(ctx context.Context, max int) ([]Order, error)
	// ReleasePending lists up to max orders whose Redis release is owed.
	ReleasePending(ctx context.Context, max int) ([]Order, error)
	// ClearReleasePending records that these orders' stock is back in Redis.
	ClearReleasePending(ctx context.Context, orderIDs []int64) error

	Order(ctx context.Context, id int64) (Order, error)
	OrdersByUser(ctx context.Context, userID int64, limit int) ([]Order, error)
	// OrdersPage returns one page of the user's orders, newest first:
	// those below p.Before, of p.Status, at most p.Limit.
	OrdersPage(ctx context.Context, userID int64, p Page) ([]Order, error)
	VoucherOrders(ctx context.Context, voucherID int64) ([]Order, error)
	Voucher(ctx context.Context, id int64) (seckill.Voucher, error)
	Stats(ctx context.Context, voucherID int64) (Stats, error)
	// ActiveSeckillVoucherIDs lists the seckill vouchers whose sale ends
	// after since: those that can have holds in Redis.
	ActiveSeckillVoucherIDs(ctx context.Context, since time.Time) ([]int64, error)
}

// Stock is the stock in Redis (seckill/redisstock.Store implements it, as
// it is): the holds the reservations left, and the repairs of its state.
type Stock interface {
	// Confirm takes holds PostgreSQL has off the pending list, so the
	// reconciler stops considering them.
	Confirm(ctx context.Context, rs []seckill.Reservation) error
	// Release gives one order's stock back, at most once (release.lua).
	Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error)
	// Pending lists the holds no worker has confirmed.
	Pending(ctx context.Context, voucherID int64, reservedBefore time.Time, max int) ([]seckill.Reservation, error)
	// FinishMoves completes the voucher's half-done moves of stock between
	// its Redis buckets (a voucher of several shards whose mover died
	// between the two steps) and returns how many it completed.
	FinishMoves(ctx context.Context, voucherID int64) (int, error)

	// Hold returns the live hold of orderID, if any of the vouchers has
	// one; UserHolds the user's live holds among them. Only the vouchers
	// named are looked at, because every Redis key is per voucher.
	Hold(ctx context.Context, orderID int64, voucherIDs []int64) (seckill.Reservation, bool, error)
	UserHolds(ctx context.Context, userID int64, voucherIDs []int64) ([]seckill.Reservation, error)
	// Snapshot reads the voucher's state in Redis (stats, drift).
	Snapshot(ctx context.Context, voucherID int64) (redisstock.Snapshot, error)

	// TakeOffSale removes the voucher's meta so nothing more is reserved.
	TakeOffSale(ctx context.Context, voucherID int64) error
	// Rebuild replaces the voucher's Redis state: holds for created and paid
	// orders, tombstones for released ones, meta (back on sale) last; with
	// a Fence, only while that heal lease still holds.
	Rebuild(ctx context.Context, t redisstock.Truth) error
	// Missing returns the vouchers among ids with no state in Redis.
	Missing(ctx context.Context, ids []int64) ([]int64, error)
	// HealRequests waits up to wait for vouchers the gateways found missing.
	HealRequests(ctx context.Context, wait time.Duration) ([]int64, error)
	// LockHeal takes the voucher's heal lease for ttl (ok false: another
	// healer has it); a Rebuild fenced by its token commits only while the
	// lease still holds.
	LockHeal(ctx context.Context, voucherID int64, ttl time.Duration) (*redisstock.HealLock, bool, error)
}

// The Redis stock is this package's stock as it is, without an adapter.
var _ Stock = (*redisstock.Store)(nil)
