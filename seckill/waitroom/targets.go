package waitroom

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// StockLeft reads the stock left of vouchers from Redis
// (seckill/redisstock.Store).
type StockLeft interface {
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// CatalogTargets returns the targets of an Admitter from the catalog in
// memory: every voucher with a waiting room that is not paused; a sold-out
// or ended one closes, and a room lets out at most as many unused passes as
// stock is left.
//
// The stock left of the rooms about to admit is read again from stock, not
// taken from the catalog: the catalog's figure lags the buys by up to its
// stock refresh, and near the sell-out that lag let in shoppers whose buy
// could only be refused as sold out. A voucher whose stock is not in Redis
// (not warmed yet, or lost with Redis's data) admits nobody until it is
// back: nobody could buy it meanwhile. What is still not counted is a pass
// claimed by a buy whose reservation has not reached Redis yet (one round
// trip): neither unused nor sold, it may let in one shopper too many for
// that long, where the catalog's figure let in a whole refresh's buys.
func CatalogTargets(catalog *seckill.Catalog, stock StockLeft) func(ctx context.Context) ([]Target, error) {
	return func(ctx context.Context) ([]Target, error) {
		snap, err := catalog.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var out []Target
		var admitting []int64
		for _, v := range snap.Vouchers() {
			line, ok := LineOf(v)
			if !ok || v.Paused {
				continue
			}
			t := Target{Line: line, Passes: max(v.StockLeft, 0),
				Over: v.StockLeft <= 0 || !now.Before(v.EndAt)}
			if !t.Over && Admitting(line, now) {
				admitting = append(admitting, v.ID)
			}
			out = append(out, t)
		}
		if len(admitting) == 0 {
			return out, nil
		}
		left, err := stock.StockLeft(ctx, admitting...)
		if err != nil {
			return nil, fmt.Errorf("stock left of the rooms admitting: %w", err)
		}
		for i, t := range out {
			if !t.Over && Admitting(t.Line, now) {
				out[i].Passes = max(left[t.Line.VoucherID], 0)
			}
		}
		return out, nil
	}
}
