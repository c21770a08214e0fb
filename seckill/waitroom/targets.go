package waitroom

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// StockLeft reads the stock left of vouchers from Redis
// (seckill/redisstock.Store).
type StockLeft interface {
	StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error)
}

// Settled tells which of some vouchers have every unit paid for: nothing
// left, nothing held unpaid, so no unit can come back (orders/pgstore.Store
// implements it from the record).
type Settled interface {
	AllPaid(ctx context.Context, voucherIDs ...int64) (map[int64]bool, error)
}

// SettledEvery is how often CatalogTargets asks Settled about each sold-out
// room: a room sold out to unpaid holds waits for them anyway, and the
// question costs a query of the record.
const SettledEvery = time.Second

// CatalogTargets returns the targets of an Admitter from the catalog in
// memory: every voucher with a waiting room that is not paused; a room
// lets out at most as many passes as stock is left, and closes only
// when its sale is over: ended, or every unit paid for (settled; nil: only
// the end closes it). A room with no stock left but units held unpaid is
// sold out, not over: those units may come back, and then go to the line.
//
// The stock left of the rooms about to admit is read again from stock, not
// taken from the catalog: the catalog's figure lags the buys by up to its
// stock refresh, and near the sell-out that lag let in shoppers whose buy
// could only be refused as sold out. A voucher whose stock is not in Redis
// (not warmed yet, or lost with Redis's data) admits nobody until it is
// back: nobody could buy it meanwhile. A pass claimed by a buy whose
// reservation has not reached the stock yet is counted by the step itself
// (Room.Admit), against this figure, so it holds its unit back.
func CatalogTargets(catalog *seckill.Catalog, stock StockLeft, settled Settled) func(ctx context.Context) ([]Target, error) {
	paid := settledMemo{settled: settled, asked: map[int64]time.Time{}, over: map[int64]bool{}}
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
			t := Target{Line: line, Passes: max(v.StockLeft, 0), Over: !now.Before(v.EndAt)}
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
		var soldOut []int64
		for i, t := range out {
			if !t.Over && Admitting(t.Line, now) {
				out[i].Passes = max(left[t.Line.VoucherID], 0)
				if _, on := left[t.Line.VoucherID]; on && out[i].Passes == 0 {
					soldOut = append(soldOut, t.Line.VoucherID)
				}
			}
		}
		over, err := paid.allPaid(ctx, soldOut, now)
		if err != nil {
			return nil, fmt.Errorf("sold-out rooms paid for: %w", err)
		}
		for i, t := range out {
			if over[t.Line.VoucherID] {
				out[i].Over = true
			}
		}
		return out, nil
	}
}

// settledMemo asks Settled about each sold-out room at most once per
// SettledEvery, and remembers the answer meanwhile.
type settledMemo struct {
	settled Settled
	mu      sync.Mutex
	asked   map[int64]time.Time
	over    map[int64]bool
}

func (m *settledMemo) allPaid(ctx context.Context, soldOut []int64, now time.Time) (map[int64]bool, error) {
	if m.settled == nil || len(soldOut) == 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var ask []int64
	for _, id := range soldOut {
		if now.Sub(m.asked[id]) >= SettledEvery {
			ask = append(ask, id)
		}
	}
	if len(ask) > 0 {
		got, err := m.settled.AllPaid(ctx, ask...)
		if err != nil {
			return nil, err
		}
		for _, id := range ask {
			m.asked[id], m.over[id] = now, got[id]
		}
	}
	out := make(map[int64]bool, len(soldOut))
	for _, id := range soldOut {
		out[id] = m.over[id]
	}
	// Forget the rooms no longer sold out, so the memo stays as small as
	// the sold-out rooms.
	for id := range m.asked {
		if _, ok := out[id]; !ok {
			delete(m.asked, id)
			delete(m.over, id)
		}
	}
	return out, nil
}
