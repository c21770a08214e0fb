package main

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// buildEdge builds this instance's gates in front of the buying path (rate
// limits, captcha, breaker with the ops switch, sold-out flag) and starts
// their background loops, which end with ctx.
func (s *system) buildEdge(ctx context.Context) (*edge.Edge, error) {
	if s.cfg.GlobalBurst >= s.cfg.GlobalRate {
		// A known trap of GCRA: it admits Burst + Rate·t, so the first
		// second after a quiet spell lets about twice the rate through.
		s.log.Warn("SECKILL_GLOBAL_BURST is not below SECKILL_GLOBAL_RATE: the first second of a rush may admit up to burst + rate",
			"rate", s.cfg.GlobalRate, "burst", s.cfg.GlobalBurst)
	}
	e, err := edge.New(s.rdb, s.stock, edge.Config{
		GlobalRate:  s.cfg.GlobalRate,
		GlobalBurst: s.cfg.GlobalBurst,
		UserRate:    s.cfg.UserRate,
		UserBurst:   s.cfg.UserBurst,

		AddressRate:     s.cfg.IPRate,
		AddressBurst:    s.cfg.IPBurst,
		BuyAddressRate:  s.cfg.BuyIPRate,
		BuyAddressBurst: s.cfg.BuyIPBurst,
		// A replayed Idempotency-Key of a limit or common voucher needs no
		// new captcha, as for a seckill voucher.
		SyncRequests: s.store,
	}, s.registry, s.log)
	if err != nil {
		return nil, err
	}
	e.Start(ctx)
	return e, nil
}

// announcingReleaser gives stock back in Redis and tells every gateway at
// once, so a voucher flagged sold out in memory is back on sale everywhere
// in milliseconds rather than at the next re-check (which still covers a
// lost announcement).
type announcingReleaser struct {
	stock *redisstock.Store
	rdb   redis.UniversalClient
	log   *slog.Logger
}

// Release implements orders.Releaser.
func (a announcingReleaser) Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	released, err := a.stock.Release(ctx, voucherID, orderID, mode)
	if released {
		if aerr := edge.Announce(ctx, a.rdb, voucherID); aerr != nil {
			a.log.Debug("stock-back announcement not sent; gateways notice at their next re-check", "voucher_id", voucherID, "err", aerr)
		}
	}
	return released, err
}

// releaser is what the workers, the sweeper and the reconciler release with.
func (s *system) releaser() orders.Releaser {
	return announcingReleaser{stock: s.stock, rdb: s.rdb, log: s.log}
}
