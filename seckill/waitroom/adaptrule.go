package waitroom

import (
	"math"
	"time"

	"github.com/flashsale/seckill/seckill"
)

// Health is the back end as the fleet measures it: what Rule.Next judges.
type Health struct {
	// BuyP99 is the highest of the gateways' p99 of their sellers' calls
	// (the reservation script and the Kafka hand-off of buys that passed
	// every limit) over their last window; 0 when none was made.
	BuyP99 time.Duration
	// Buys is how many seller calls the gateways made in that window;
	// Failed is how many failed for the back end's sake (answered 5xx),
	// plus the orders the workers could not persist.
	Buys, Failed int64
	// Breaker is the worst of the gateways' circuit breakers: 0 closed, 1
	// half-open, 2 open (forced open included), as seckill_breaker_state.
	Breaker int
	// Lag is the workers' consumer group lag in messages (produced, not
	// yet committed), LagBefore the measurement before it; -1 when nobody
	// measured it lately.
	Lag, LagBefore int64
}

// UnknownHealth is the health of a fleet that reports nothing: the rule
// holds the rate (it never speeds up blind).
var UnknownHealth = Health{Breaker: 1, Lag: -1, LagBefore: -1}

// RateState is an adaptive room's controller state, which the fleet shares
// in Redis (queue_rate.lua).
type RateState struct {
	// Rate is the admission rate in force, shoppers a second.
	Rate int64
	// Base is the room's admit_per_second the rate started from: when the
	// operator sets a new one, the rate starts again from it.
	Base int64
	// Changed is when Rate last changed; Trouble when the back end was
	// last judged in trouble.
	Changed, Trouble time.Time
}

func (s RateState) same(o RateState) bool {
	return s.Rate == o.Rate && s.Base == o.Base &&
		s.Changed.UnixMilli() == o.Changed.UnixMilli() && s.Trouble.UnixMilli() == o.Trouble.UnixMilli()
}

// Rule is the control rule of adaptive rooms; a zero field means its
// default (DefaultRule). The rule and why it does not oscillate are in the
// package's README.
type Rule struct {
	// Slow is the factor of a decrease (0.7: 30% slower).
	Slow float64
	// Grow is the share of an increase (0.1: 10% faster, at least 1).
	Grow float64
	// Band is the dead band's lower edge as a share of the target p99
	// (0.8): between it and the target the rate holds.
	Band float64
	// SlowEvery is the least time between a change and a decrease;
	// GrowEvery between a change and an increase; Calm between the last
	// trouble and an increase.
	SlowEvery, GrowEvery, Calm time.Duration
	// MaxLag is the workers' lag, in messages, above which (while it is
	// not falling) they are falling behind; below half of it they keep up.
	MaxLag int64
	// FailShare is the share of the window's buys failing above which the
	// back end is in trouble (0.01).
	FailShare float64
}

// DefaultRule is the rule of every adaptive room.
var DefaultRule = Rule{Slow: 0.7, Grow: 0.1, Band: 0.8, SlowEvery: time.Second, GrowEvery: 2 * time.Second,
	Calm: 3 * time.Second, MaxLag: 1000, FailShare: 0.01}

func (r Rule) withDefaults() Rule {
	d := DefaultRule
	if r.Slow <= 0 || r.Slow >= 1 {
		r.Slow = d.Slow
	}
	if r.Grow <= 0 {
		r.Grow = d.Grow
	}
	if r.Band <= 0 || r.Band >= 1 {
		r.Band = d.Band
	}
	if r.SlowEvery <= 0 {
		r.SlowEvery = d.SlowEvery
	}
	if r.GrowEvery <= 0 {
		r.GrowEvery = d.GrowEvery
	}
	if r.Calm <= 0 {
		r.Calm = d.Calm
	}
	if r.MaxLag <= 0 {
		r.MaxLag = d.MaxLag
	}
	if r.FailShare <= 0 {
		r.FailShare = d.FailShare
	}
	return r
}

// verdict is what the rule makes of the health.
type verdict int

const (
	hold verdict = iota // in the dead band, or a signal unknown
	slow                // the back end is in trouble
	grow                // the back end has room
)

// judge is the verdict on h for a room aiming at target. Trouble is any of:
// an open breaker, failing buys or orders, the buy path's p99 above the
// target, the workers' lag above MaxLag and not falling. Room to grow needs
// every signal known and well clear of its limit.
func (r Rule) judge(h Health, target time.Duration) verdict {
	buys := max(h.Buys, 1)
	switch {
	case h.Breaker >= 2,
		float64(h.Failed) > r.FailShare*float64(buys),
		h.BuyP99 > target,
		h.Lag > r.MaxLag && h.Lag >= h.LagBefore:
		return slow
	case h.Breaker == 1, h.Failed > 0,
		float64(h.BuyP99) > r.Band*float64(target),
		h.Lag < 0, h.Lag > r.MaxLag/2:
		return hold
	}
	return grow
}

// Next is the room's state after judging h at now (Redis's clock): a, the
// room's bounds, and start, its admit_per_second. A room without a rate
// yet, or whose admit_per_second the operator changed, starts at start.
// Trouble cuts the rate to Slow times it (at least one less), at most once
// per SlowEvery; room to grow raises it by Grow (at least one), at most once
// per GrowEvery and only Calm after the last trouble; anything else holds
// it. The rate stays within a's bounds.
func (r Rule) Next(s RateState, h Health, a seckill.Adaptive, start int64, now time.Time) RateState {
	r = r.withDefaults()
	clamp := func(n int64) int64 { return min(max(n, a.MinPerSecond), a.MaxPerSecond) }
	if s.Rate <= 0 || s.Base != start {
		return RateState{Rate: clamp(start), Base: start, Changed: now, Trouble: s.Trouble}
	}
	target := time.Duration(a.TargetP99Ms) * time.Millisecond
	switch r.judge(h, target) {
	case slow:
		s.Trouble = now
		if now.Sub(s.Changed) >= r.SlowEvery && s.Rate > a.MinPerSecond {
			s.Rate, s.Changed = clamp(min(s.Rate-1, int64(float64(s.Rate)*r.Slow))), now
		}
	case grow:
		if now.Sub(s.Trouble) >= r.Calm && now.Sub(s.Changed) >= r.GrowEvery && s.Rate < a.MaxPerSecond {
			step := max(1, int64(math.Round(float64(s.Rate)*r.Grow)))
			s.Rate, s.Changed = clamp(s.Rate+step), now
		}
	}
	s.Rate = clamp(s.Rate)
	return s
}
