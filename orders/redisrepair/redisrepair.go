// Package redisrepair lets orders' drift report, repair and healer work on
// the Redis stock of seckill/redisstock.
package redisrepair

import (
	"context"
	"time"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// Stock is a redisstock.Store seen as orders.StockViews, orders.RepairStock
// and orders.HealStock: the store's own methods (Confirm, Release,
// HealRequests...) are promoted, and View, Rebuild and LockHeal added.
type Stock struct {
	*redisstock.Store
	// fence is the heal lease a healer's rebuild must still hold ("" for
	// the operator's repair).
	fence string
}

var (
	_ orders.StockViews  = Stock{}
	_ orders.RepairStock = Stock{}
	_ orders.HealStock   = Stock{}
)

// New returns store seen from orders, unfenced (the operator's repair).
func New(store *redisstock.Store) Stock { return Stock{Store: store} }

// LockHeal takes the voucher's heal lease and returns the repair stock
// fenced by it.
func (r Stock) LockHeal(ctx context.Context, voucherID int64, ttl time.Duration) (orders.RepairStock, orders.HealLease, bool, error) {
	l, ok, err := r.Store.LockHeal(ctx, voucherID, ttl)
	if err != nil || !ok {
		return nil, nil, false, err
	}
	return Stock{Store: r.Store, fence: l.Token()}, l, true, nil
}

// Rebuild writes the voucher's Redis state from PostgreSQL's truth, under the
// fence when there is one.
func (r Stock) Rebuild(ctx context.Context, v seckill.Voucher, holds, released []seckill.Reservation) error {
	return r.Store.Rebuild(ctx, redisstock.Truth{Voucher: v, Holds: holds, Released: released, Fence: r.fence})
}

// View is Redis's view of the voucher, from one snapshot.
func (r Stock) View(ctx context.Context, voucherID int64) (orders.RedisView, error) {
	sn, err := r.Store.Snapshot(ctx, voucherID)
	return orders.RedisView{OnSale: sn.OnSale, Left: sn.Left, Total: sn.Total, Held: sn.Held,
		Pending: sn.Pending, Balanced: sn.Balanced()}, err
}
