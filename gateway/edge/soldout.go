package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// SoldOut answers 409 sold_out from memory for vouchers this instance saw
// run out, without a Redis call. It implements buy.SoldOut.
//
// A sold-out voucher still owes every accepted Idempotency-Key its first
// order (seckill/RULES.md: idempotent everywhere). So once a voucher is flagged, the re-check loop copies its
// request keys into memory (they cannot grow while nothing is left), and a
// replay is answered from that copy, also without a Redis call. Until the
// copy is there, or when it would be too large, keyed attempts go on to the
// reservation script, which replays them; so do the replays of orders that
// were not decided yet when copied (their gateway may still fence them).
//
// The pipeline tells it every seller's answer (Saw): it learns "sold out"
// from a reservation that left 0, or a refusal that says 0 are left, and
// from a seller's ErrSoldOut without a count, which it confirms with its
// next re-check. It unlearns it within one re-check interval: the stock
// of every flagged voucher is read again in one pipelined round trip, so a
// cancel or a timeout anywhere in the fleet puts the voucher back on sale
// here within about half a second, the stock's announcement
// (redisstock.StockChannel) or not.
type SoldOut struct {
	rdb    redis.UniversalClient
	stock  StockReader
	every  time.Duration
	m      *metrics
	log    *slog.Logger
	nowFun func() time.Time

	mu       sync.RWMutex
	flagged  map[int64]time.Time // voucher -> when it was flagged
	suspects map[int64]struct{}  // vouchers the buyer said were sold out, to confirm
	replays  map[int64]replaySet // flagged voucher -> its accepted requests
	// copyNow wakes the re-check loop to copy a newly flagged voucher's
	// request keys at once: until they are in memory, every keyed attempt
	// still costs the rate limit and the script.
	copyNow chan struct{}
}

// maxReplayKeys bounds the request keys copied per sold-out voucher. A sale
// of a thousand items has at most a thousand; a voucher with more keys than
// this lets keyed attempts reach the script instead.
const maxReplayKeys = 200_000

// replaySet is a sold-out voucher's accepted requests and their orders.
// complete is false when the voucher had too many to copy.
type replaySet struct {
	orders   map[redisstock.Request]int64
	complete bool
}

func newSoldOut(rdb redis.UniversalClient, stock StockReader, every time.Duration, m *metrics, log *slog.Logger) *SoldOut {
	return &SoldOut{
		rdb: rdb, stock: stock, every: every, m: m, log: log, nowFun: time.Now,
		flagged: make(map[int64]time.Time), suspects: make(map[int64]struct{}),
		replays: make(map[int64]replaySet), copyNow: make(chan struct{}, 1),
	}
}

// Replay implements buy.SoldOut: the first order of a flagged voucher's
// known request key, from memory.
func (s *SoldOut) Replay(a *buy.Attempt) (int64, bool) {
	id, ok := s.replay(a)
	if ok {
		s.m.allow(gateSoldOut)
	}
	return id, ok
}

// Refuse implements buy.SoldOut.
func (s *SoldOut) Refuse(a *buy.Attempt) error {
	if err := s.refuseAttempt(a); err != nil {
		s.m.reject(gateSoldOut, "sold_out")
		return err
	}
	return nil
}

// Saw implements buy.SoldOut. A sale that took the last unit, or a refusal
// that says none is left, flags the voucher; a sold-out refusal without a
// count makes it a suspect the re-check confirms; a reservation given back
// because it could not be queued puts it back on sale here at once (the
// stock announces the release to the fleet, redisstock.StockChannel).
func (s *SoldOut) Saw(voucherID int64, sale buy.Sale, err error) {
	if sale.StockKnown && sale.StockLeft == 0 {
		s.flag(voucherID)
	}
	switch {
	case errors.Is(err, seckill.ErrSoldOut):
		s.suspect(voucherID)
	case errors.Is(err, seckill.ErrNotQueued):
		s.Forget(voucherID)
	}
}

// IsFlagged reports whether this instance answers sold out for the voucher.
func (s *SoldOut) IsFlagged(voucherID int64) bool {
	s.mu.RLock()
	_, ok := s.flagged[voucherID]
	s.mu.RUnlock()
	return ok
}

// refuseAttempt says sold out, from memory, unless the voucher has stock or
// the attempt may be a replay this instance cannot answer itself.
func (s *SoldOut) refuseAttempt(a *buy.Attempt) error {
	v := a.Request.VoucherID
	s.mu.RLock()
	_, flagged := s.flagged[v]
	set, copied := s.replays[v]
	s.mu.RUnlock()
	if !flagged {
		return nil
	}
	if a.Request.RequestKey != "" {
		if !copied || !set.complete {
			return nil // the script knows
		}
		if _, known := set.orders[request(a)]; known {
			return nil
		}
	}
	return fmt.Errorf("%w: voucher %d", seckill.ErrSoldOut, v)
}

// replay returns the first order of a sold-out voucher's known request key,
// when that order was decided when copied: a request whose order was
// undecided (redisstock.UndecidedOrder) goes on to the script, which waits
// for the decision (seckill/RULES.md, "A 202 stands").
func (s *SoldOut) replay(a *buy.Attempt) (int64, bool) {
	if a.Request.RequestKey == "" {
		return 0, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, flagged := s.flagged[a.Request.VoucherID]; !flagged {
		return 0, false
	}
	id, ok := s.replays[a.Request.VoucherID].orders[request(a)]
	return id, ok && id != redisstock.UndecidedOrder
}

// request names the attempt's Idempotency-Key for the stock.
func request(a *buy.Attempt) redisstock.Request {
	return redisstock.Request{UserID: a.Request.UserID, Key: a.Request.RequestKey}
}

func (s *SoldOut) flag(voucherID int64) {
	s.mu.Lock()
	_, was := s.flagged[voucherID]
	if !was {
		s.flagged[voucherID] = s.nowFun()
	}
	s.mu.Unlock()
	if !was {
		select {
		case s.copyNow <- struct{}{}:
		default: // a copy is already due
		}
	}
}

// Forget puts the voucher back on sale on this instance.
func (s *SoldOut) Forget(voucherID int64) {
	s.mu.Lock()
	delete(s.flagged, voucherID)
	delete(s.replays, voucherID)
	s.mu.Unlock()
}

func (s *SoldOut) suspect(voucherID int64) {
	s.mu.Lock()
	s.suspects[voucherID] = struct{}{}
	s.mu.Unlock()
}

// start runs the re-check loop and the stock channel's watcher on wg until
// ctx ends, and returns once the watcher has subscribed (or failed to: the
// flags then go at their re-check).
func (s *SoldOut) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { s.recheckLoop(ctx) })
	if s.rdb == nil {
		return
	}
	w := redisstock.NewWatcher(redisstock.WatcherConfig{Redis: s.rdb, Log: s.log,
		On: map[string]func(int64){redisstock.StockChannel: s.Forget}})
	ended := make(chan struct{})
	wg.Go(func() {
		defer close(ended)
		if err := w.Run(ctx); err != nil {
			s.log.Warn("stock announcements not followed; sold-out flags go at their re-check", "err", err)
		}
	})
	select {
	case <-w.Ready():
	case <-ended:
	}
}

func (s *SoldOut) recheckLoop(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.copyNow:
			s.copyReplays(ctx)
		case <-t.C:
			s.recheck(ctx)
			s.copyReplays(ctx)
		}
	}
}

// recheck reads the stock of every flagged or suspected voucher in one
// round trip and keeps exactly those with nothing left. If the read fails,
// every flag goes: saying "sold out" on stale knowledge is the one thing this
// gate must not do, and the breaker handles a Redis that is down.
func (s *SoldOut) recheck(ctx context.Context) {
	s.mu.RLock()
	ids := make([]int64, 0, len(s.flagged)+len(s.suspects))
	for id := range s.flagged {
		ids = append(ids, id)
	}
	for id := range s.suspects {
		if _, ok := s.flagged[id]; !ok {
			ids = append(ids, id)
		}
	}
	s.mu.RUnlock()
	if len(ids) == 0 {
		return
	}
	started := s.nowFun()
	ctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	left, err := s.stock.StockLeft(ctx, ids...)

	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.suspects)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sold-out flags not re-checked; forgetting them", "err", err)
		}
		clear(s.flagged)
		clear(s.replays)
		return
	}
	for _, id := range ids {
		if n, ok := left[id]; ok && n <= 0 {
			if _, was := s.flagged[id]; !was {
				s.flagged[id] = started
			}
			continue
		}
		// A flag set after the read began may be newer than what was read.
		if at, was := s.flagged[id]; was && at.Before(started) {
			delete(s.flagged, id)
			delete(s.replays, id)
		}
	}
}

// copyReplays copies the request keys of flagged vouchers that have no copy
// yet. It runs after recheck, outside the lock: a sold-out voucher's keys
// cannot change until stock comes back, and stock coming back drops the
// flag and the copy together.
func (s *SoldOut) copyReplays(ctx context.Context) {
	if s.rdb == nil {
		return
	}
	s.mu.RLock()
	var todo []int64
	for id := range s.flagged {
		if _, ok := s.replays[id]; !ok {
			todo = append(todo, id)
		}
	}
	s.mu.RUnlock()
	for _, id := range todo {
		started := s.nowFun()
		set, err := s.readReplays(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Debug("sold-out voucher's request keys not copied; replays go to Redis", "voucher_id", id, "err", err)
			}
			return
		}
		s.mu.Lock()
		// Keep the copy only if the flag it belongs to is still the one
		// that was set before the read.
		if at, ok := s.flagged[id]; ok && !at.After(started) {
			s.replays[id] = set
		}
		s.mu.Unlock()
	}
}

func (s *SoldOut) readReplays(ctx context.Context, voucherID int64) (replaySet, error) {
	ctx, cancel := context.WithTimeout(ctx, s.every)
	defer cancel()
	orders, complete, err := s.stock.RequestKeys(ctx, voucherID, maxReplayKeys)
	if err != nil {
		return replaySet{}, err
	}
	return replaySet{orders: orders, complete: complete}, nil
}
