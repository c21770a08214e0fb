package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway"
	"github.com/flashsale/seckill/seckill"
)

// StockChannel is the Redis pub/sub channel on which a releaser may publish a
// voucher id (decimal) when stock came back; every instance then forgets that
// the voucher was sold out at once instead of at its next re-check.
const StockChannel = "seckill:stock"

// SoldOut answers 409 sold_out from memory for vouchers this instance saw
// run out, without a Redis call. It implements gateway.Gate.
//
// It learns "sold out" from the stock's answers (see Edge.ObserveStock: a
// reservation that left 0, or a refusal that says 0 are left) and, when the
// stock is not observed, from the buyer's ErrSoldOut, which it confirms with
// its next re-check. It unlearns it within one re-check interval: the stock
// of every flagged voucher is read again in one pipelined round trip, so a
// cancel or a timeout anywhere in the fleet puts the voucher back on sale
// here within about half a second, Redis pub/sub on StockChannel or not.
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
}

func newSoldOut(rdb redis.UniversalClient, stock StockReader, every time.Duration, m *metrics, log *slog.Logger) *SoldOut {
	return &SoldOut{
		rdb: rdb, stock: stock, every: every, m: m, log: log, nowFun: time.Now,
		flagged: make(map[int64]time.Time), suspects: make(map[int64]struct{}),
	}
}

// Pass implements gateway.Gate.
func (s *SoldOut) Pass(ctx context.Context, a *gateway.Attempt, next gateway.BuyFunc) (gateway.Purchase, error) {
	if err := s.refuse(a.Request.VoucherID); err != nil {
		s.m.reject(gateSoldOut, "sold_out")
		return gateway.Purchase{}, err
	}
	p, err := next(ctx, a)
	if errors.Is(err, seckill.ErrSoldOut) {
		s.suspect(a.Request.VoucherID)
	}
	return p, err
}

// IsFlagged reports whether this instance answers sold out for the voucher.
func (s *SoldOut) IsFlagged(voucherID int64) bool {
	s.mu.RLock()
	_, ok := s.flagged[voucherID]
	s.mu.RUnlock()
	return ok
}

func (s *SoldOut) refuse(voucherID int64) error {
	if !s.IsFlagged(voucherID) {
		return nil
	}
	return fmt.Errorf("%w: voucher %d", seckill.ErrSoldOut, voucherID)
}

func (s *SoldOut) flag(voucherID int64) {
	s.mu.Lock()
	if _, ok := s.flagged[voucherID]; !ok {
		s.flagged[voucherID] = s.nowFun()
	}
	s.mu.Unlock()
}

// Forget puts the voucher back on sale on this instance.
func (s *SoldOut) Forget(voucherID int64) {
	s.mu.Lock()
	delete(s.flagged, voucherID)
	s.mu.Unlock()
}

func (s *SoldOut) suspect(voucherID int64) {
	s.mu.Lock()
	s.suspects[voucherID] = struct{}{}
	s.mu.Unlock()
}

func (s *SoldOut) start(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { s.recheckLoop(ctx) })
	if s.rdb != nil {
		sub := s.rdb.Subscribe(ctx, StockChannel)
		wg.Go(func() { s.listen(ctx, sub) })
	}
}

func (s *SoldOut) recheckLoop(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.recheck(ctx)
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
		}
	}
}

// listen forgets a voucher as soon as a releaser announces its stock came back.
func (s *SoldOut) listen(ctx context.Context, sub *redis.PubSub) {
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			id, err := strconv.ParseInt(msg.Payload, 10, 64)
			if err != nil {
				continue
			}
			s.Forget(id)
		}
	}
}

// observedStock is the stock the buyer reserves in, seen by the sold-out flag.
type observedStock struct {
	seckill.Stock
	soldOut *SoldOut
}

// Reserve flags the voucher when this reservation took the last item or a
// refusal says none is left: the refusal carries StockLeft, the buyer drops it.
func (o *observedStock) Reserve(ctx context.Context, r seckill.Reservation) (seckill.ReserveResult, error) {
	res, err := o.Stock.Reserve(ctx, r)
	if (err == nil && !res.Replayed || errors.Is(err, seckill.ErrSoldOut)) && res.StockLeft == 0 {
		o.soldOut.flag(r.VoucherID)
	}
	return res, err
}

// Release forgets the flag here and tells the fleet when stock came back.
func (o *observedStock) Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	ok, err := o.Stock.Release(ctx, voucherID, orderID, mode)
	if ok {
		o.soldOut.Forget(voucherID)
		if o.soldOut.rdb != nil {
			if perr := o.soldOut.rdb.Publish(ctx, StockChannel, strconv.FormatInt(voucherID, 10)).Err(); perr != nil {
				o.soldOut.log.Debug("stock channel publish failed; the re-check will notice", "err", perr)
			}
		}
	}
	return ok, err
}

// Announce tells every instance that voucherID has stock again. Releasers
// outside the gateway (the sweeper, the workers) may call it for a faster
// turnaround than the re-check.
func Announce(ctx context.Context, rdb redis.UniversalClient, voucherID int64) error {
	return rdb.Publish(ctx, StockChannel, strconv.FormatInt(voucherID, 10)).Err()
}
