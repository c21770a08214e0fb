package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// RedisView is what Redis holds of one seckill voucher (from
// redisstock.Snapshot).
type RedisView struct {
	// OnSale is false when Redis has no meta for the voucher (never warmed,
	// taken off sale, or lost with Redis's data).
	OnSale bool
	// Left and Total are meta's stock and total.
	Left, Total int64
	// Held sums the live holds (reserved, created and paid orders); Pending
	// counts holds no worker has persisted yet.
	Held, Pending int64
	// Balanced is Redis's own invariant: left + held == total, and the
	// per-user counts add up to held.
	Balanced bool
}

// Drift compares one voucher's Redis state with PostgreSQL.
type Drift struct {
	// InFlight is PostgreSQL's stock_left minus Redis's left: the stock held
	// by reservations the workers have not persisted yet. It must equal
	// Redis's held minus what PostgreSQL sold, and be 0 when nothing is
	// pending.
	InFlight int64
	// Problems lists every disagreement, empty when the two agree.
	Problems []string
}

// OK reports whether Redis and PostgreSQL agree.
func (d Drift) OK() bool { return len(d.Problems) == 0 }

// viewOf is what the stats and the drift report say of a Redis snapshot.
func viewOf(sn redisstock.Snapshot) RedisView {
	return RedisView{OnSale: sn.OnSale, Left: sn.Left, Total: sn.Total, Held: sn.Held,
		Pending: sn.Pending, Balanced: sn.Balanced()}
}

// StatsService answers the admin stats route: PostgreSQL's counts, plus for
// a seckill voucher Redis's live stock, the holds not yet persisted
// (Orders[StatusReserved]) and the drift between the two.
type StatsService struct {
	store Record
	views Stock
	grace time.Duration
}

// StatsConfig is what NewStatsService builds a StatsService from.
type StatsConfig struct {
	// Record gives PostgreSQL's counts.
	Record Record
	// Stock gives Redis's live figures of a seckill voucher.
	Stock Stock
	// StateGrace is how long after its sale ends a seckill voucher's Redis
	// state expires (the stock's own): past that, no state in Redis is
	// what should be, not drift. Zero: the state never expires.
	StateGrace time.Duration
}

// NewStatsService returns a StatsService.
func NewStatsService(cfg StatsConfig) *StatsService {
	return &StatsService{store: cfg.Record, views: cfg.Stock, grace: cfg.StateGrace}
}

// Stats returns the voucher's figures, or ErrNotFound.
func (s *StatsService) Stats(ctx context.Context, voucherID int64) (Stats, error) {
	st, err := s.store.Stats(ctx, voucherID)
	if err != nil {
		return Stats{}, err
	}
	v, err := s.store.Voucher(ctx, voucherID)
	if err != nil {
		return Stats{}, err
	}
	st.Orders[StatusReserved], st.Quantity[StatusReserved] = 0, 0
	if v.Kind != seckill.KindSeckill {
		return st, nil
	}
	sn, err := s.views.Snapshot(ctx, voucherID)
	view := viewOf(sn)
	if err != nil {
		return Stats{}, fmt.Errorf("orders: stats %d: redis: %w", voucherID, err)
	}
	d := Compare(st, view)
	if !view.OnSale && s.grace > 0 && time.Now().After(v.EndAt.Add(s.grace)) {
		// Expired on purpose after the sale: PostgreSQL has the last word.
		d = Drift{}
	}
	st.Redis, st.Drift = &view, &d
	st.Orders[StatusReserved] = view.Pending
	st.Quantity[StatusReserved] = max(d.InFlight, 0)
	if view.OnSale {
		st.StockLeft = view.Left
	}
	return st, nil
}

// Compare computes the drift between PostgreSQL's stats and Redis's view of
// a seckill voucher. Reservations in flight make the two differ by the same
// amount in left and in held; anything else is drift.
func Compare(st Stats, view RedisView) Drift {
	sold := st.Quantity[StatusCreated] + st.Quantity[StatusPaid]
	d := Drift{InFlight: st.StockLeft - view.Left}
	add := func(format string, args ...any) { d.Problems = append(d.Problems, fmt.Sprintf(format, args...)) }
	if !view.OnSale {
		add("not on sale in Redis (no meta): repair rebuilds it from PostgreSQL")
		return d
	}
	if !view.Balanced {
		add("redis unbalanced: left %d + held %d != total %d, or per-user counts disagree", view.Left, view.Held, view.Total)
	}
	if view.Total != st.StockTotal {
		add("total: redis %d, postgresql %d", view.Total, st.StockTotal)
	}
	if st.StockLeft+sold != st.StockTotal {
		add("postgresql unbalanced: left %d + sold %d != total %d", st.StockLeft, sold, st.StockTotal)
	}
	if held := view.Held - sold; held != d.InFlight {
		add("redis holds %d beyond what postgresql sold, but left differs by %d", held, d.InFlight)
	}
	if d.InFlight < 0 {
		add("redis has %d more left than postgresql", -d.InFlight)
	}
	if view.Pending == 0 && d.InFlight != 0 {
		add("nothing pending, yet left differs by %d", d.InFlight)
	}
	return d
}

// repairReads is how often Repair reads PostgreSQL again when a
// cancellation lands between its two reads.
const repairReads = 5

// splitForRebuild sorts a voucher's orders into what Redis must hold
// (created and paid) and what it must know as released, and lists the
// released ones still flagged for a Redis release.
func splitForRebuild(list []Order) (holds, released []seckill.Reservation, owed []int64) {
	for _, o := range list {
		r := seckill.Reservation{OrderID: o.ID, VoucherID: o.VoucherID, UserID: o.UserID, Quantity: o.Quantity,
			RequestKey: o.RequestKey, ReservedAt: o.ReservedAt}
		if o.Status == StatusCreated || o.Status == StatusPaid {
			holds = append(holds, r)
			continue
		}
		released = append(released, r)
		if o.ReleasePending {
			owed = append(owed, o.ID)
		}
	}
	return holds, released, owed
}

// Repair rebuilds a seckill voucher's Redis state from PostgreSQL without
// selling anything twice while it runs:
//
//  1. take the voucher off sale in Redis (no reservation can succeed);
//  2. wait until the consumer group has committed past every message
//     produced up to now + producerTimeout, so every reservation made before
//     step 1 is persisted in PostgreSQL or never will be;
//  3. record the holds still pending (their messages never came) as failed;
//  4. read the orders and stock from PostgreSQL and rebuild Redis from them,
//     putting the voucher back on sale last.
//
// It returns what it rebuilt; on an error the voucher may stay off sale, and
// running Repair again is safe.
func Repair(ctx context.Context, voucherID int64, store Record, stock Stock, drain Drain, producerTimeout time.Duration) (RepairResult, error) {
	failed, holds, released, v, err := repair(ctx, voucherID, store, stock, drain, producerTimeout)
	if err != nil {
		return RepairResult{}, err
	}
	res := RepairResult{Failed: failed, Holds: len(holds), Released: released, Left: v.StockLeft}
	for _, h := range holds {
		res.Held += h.Quantity
	}
	return res, nil
}

// RepairResult is what Repair wrote back into Redis.
type RepairResult struct {
	// Failed are the holds whose messages never came (step 3), now failed
	// orders in PostgreSQL.
	Failed []Order
	// Holds counts the created and paid orders written back as holds, Held
	// their quantity; Released counts the cancelled and failed orders
	// written back as released; Left is the stock put back on sale.
	Holds      int
	Held, Left int64
	Released   int
}

func repair(ctx context.Context, voucherID int64, store Record, stock Stock, drain Drain, producerTimeout time.Duration) (
	failed []Order, holds []seckill.Reservation, nReleased int, v seckill.Voucher, err error) {
	v, err = store.Voucher(ctx, voucherID)
	if err != nil {
		return nil, nil, 0, v, err
	}
	if v.Kind != seckill.KindSeckill {
		return nil, nil, 0, v, fmt.Errorf("orders: repair: voucher %d is sold in PostgreSQL only: %w", voucherID, apperr.ErrInvalidInput)
	}
	if err := stock.TakeOffSale(ctx, voucherID); err != nil {
		return nil, nil, 0, v, fmt.Errorf("orders: repair: off sale: %w", err)
	}
	until := time.Now().Add(producerTimeout)
	for {
		if wait := time.Until(until); wait > 0 {
			if err := pause.For(ctx, wait); err != nil {
				return nil, nil, 0, v, err
			}
		}
		ok, err := drain.DrainedBefore(ctx, until)
		if err != nil {
			return nil, nil, 0, v, fmt.Errorf("orders: repair: queue: %w", err)
		}
		if ok {
			break
		}
		if err := pause.For(ctx, 100*time.Millisecond); err != nil {
			return nil, nil, 0, v, fmt.Errorf("orders: repair: waiting for the workers to catch up (are they running?): %w", err)
		}
	}
	orphans, err := stock.Pending(ctx, voucherID, time.Now().Add(time.Hour), 1<<20)
	if err != nil {
		return nil, nil, 0, v, fmt.Errorf("orders: repair: pending: %w", err)
	}
	for _, h := range orphans {
		o, inserted, err := store.InsertFailed(ctx, h)
		if err != nil {
			return nil, nil, 0, v, fmt.Errorf("orders: repair: %w", err)
		}
		if inserted {
			failed = append(failed, o)
		}
	}
	// Cancellations go on while the voucher is off sale. One that commits
	// between the two reads makes them disagree (Rebuild refuses the
	// unbalanced figures): read again. One that commits after them released
	// its order in the old keys, which Rebuild then writes back as a hold:
	// release those again below.
	for attempt := 1; ; attempt++ {
		list, err := store.VoucherOrders(ctx, voucherID)
		if err != nil {
			return nil, nil, 0, v, err
		}
		if v, err = store.Voucher(ctx, voucherID); err != nil {
			return nil, nil, 0, v, err
		}
		var released []seckill.Reservation
		var owed []int64
		holds, released, owed = splitForRebuild(list)
		nReleased = len(released)
		err = stock.Rebuild(ctx, redisstock.Truth{Voucher: v, Holds: holds, Released: released})
		if errors.Is(err, apperr.ErrInvalidInput) && attempt < repairReads {
			continue
		}
		if err != nil {
			return nil, nil, 0, v, fmt.Errorf("orders: repair: rebuild (voucher %d stays off sale; run the repair again): %w", voucherID, err)
		}
		// The rebuilt state already has these released (tombstones).
		if err := store.ClearReleasePending(ctx, owed); err != nil {
			return nil, nil, 0, v, err
		}
		break
	}
	after, err := store.VoucherOrders(ctx, voucherID)
	if err != nil {
		return nil, nil, 0, v, err
	}
	rebuiltAsHold := make(map[int64]bool, len(holds))
	for _, h := range holds {
		rebuiltAsHold[h.OrderID] = true
	}
	for _, o := range after {
		if (o.Status == StatusCancelled || o.Status == StatusFailed) && rebuiltAsHold[o.ID] {
			if _, err := stock.Release(ctx, voucherID, o.ID, seckill.ReleaseAny); err != nil {
				return nil, nil, 0, v, fmt.Errorf("orders: repair: release order %d cancelled during the rebuild: %w", o.ID, err)
			}
		}
	}
	return failed, holds, nReleased, v, nil
}
