package app

import (
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/flashsale/seckill/gateway/edge"
)

// buildEdge builds this instance's gates in front of the buying path (rate
// limits, captcha, breaker with the ops switch, sold-out flag). Their
// background loops are a part of the gateway role (gatewayParts): among
// them is the fleet's heartbeat, which makes every other gateway halve its
// share of the global limit for this one, so it runs only once this
// process listens, and a second instance that cannot bind never joins the
// fleet.
func (s *System) buildEdge() (*edge.Edge, error) {
	if s.cfg.GlobalBurst >= s.cfg.GlobalRate {
		// A known trap of GCRA: it admits Burst + Rate·t, so the first
		// second after a quiet spell lets about twice the rate through.
		s.log.Warn("SECKILL_GLOBAL_BURST is not below SECKILL_GLOBAL_RATE: the first second of a rush may admit up to burst + rate",
			"rate", s.cfg.GlobalRate, "burst", s.cfg.GlobalBurst)
	}
	e, err := edge.New(edge.Config{
		Redis: s.rdb, Stock: s.stock, Registerer: s.registry, Log: s.log,

		GlobalRate:  s.cfg.GlobalRate,
		GlobalBurst: s.cfg.GlobalBurst,
		UserRate:    s.cfg.UserRate,
		UserBurst:   s.cfg.UserBurst,
		// The reservation judges seckill buys' user limit (system.go).
		UserLimitInStock: true,

		AddressRate:     s.cfg.IPRate,
		AddressBurst:    s.cfg.IPBurst,
		BuyAddressRate:  s.cfg.BuyIPRate,
		BuyAddressBurst: s.cfg.BuyIPBurst,

		ShopperRate:         s.cfg.ShopperRate,
		ShopperBurst:        s.cfg.ShopperBurst,
		ShopperAddressRate:  s.cfg.ShopperIPRate,
		ShopperAddressBurst: s.cfg.ShopperIPBurst,

		RegisterLimit: redis_rate.Limit{Rate: s.cfg.RegisterRate, Burst: s.cfg.RegisterBurst, Period: time.Minute},
		PoW: edge.PoWConfig{
			BaseBits: s.cfg.PoWBaseBits, MaxBits: s.cfg.PoWMaxBits,
			Window: s.cfg.PoWWindow, TTL: s.cfg.PoWTTL,
			AddressFree: s.cfg.PoWAddressFree, VoucherFree: s.cfg.PoWVoucherFree,
		},
	})
	if err != nil {
		return nil, err
	}
	s.edge = e
	return e, nil
}
