// Package fleethealth shares what each process of the fleet measures of the
// back end, so that every gateway judges the same picture: the p99 and
// failures of the buys that reached the seller over the last window, the circuit breakers' state, and
// the workers' consumer lag.
//
// Each process publishes one sample a second under its own field of one
// Redis hash (this package's alone):
//
//	seckill:fleethealth  hash  process id -> JSON Sample
//
// A reader takes the samples younger than Fresh and folds them into one
// Fleet: the worst p99 and breaker, the sums of buys and failures, the
// largest lag. A process that stops publishing drops out after Fresh, and
// its field is deleted after Forget, so the hash stays as small as the
// fleet.
package fleethealth

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Key is the Redis hash of the fleet's samples.
const Key = "seckill:fleethealth"

// Defaults of Board and Publisher.
const (
	// DefaultEvery is how often a process publishes: each sample covers
	// the window since the one before.
	DefaultEvery = time.Second
	// Fresh is how old a sample may be and still count.
	Fresh = 3 * time.Second
	// Forget is how old a sample is when a reader deletes it.
	Forget = time.Minute
)

// Sample is what one process measured over its last window. A process
// fills what its roles measure and leaves the rest at zero (Lag -1).
type Sample struct {
	// At is when it was measured.
	At time.Time `json:"at"`
	// BuyP99 is the 99th percentile of the seller's calls in the window
	// (the reservation script and the Kafka hand-off of buys that passed
	// every limit); 0 when none was made. Refusals before the seller cost
	// the back end nothing and are not in it.
	BuyP99 time.Duration `json:"buy_p99"`
	// Buys is how many seller calls were made in the window, Failed how
	// many failed for the back end's sake (5xx) plus the orders the
	// workers could not persist.
	Buys   int64 `json:"buys"`
	Failed int64 `json:"failed"`
	// Breaker is the worst of the process's circuit breakers: 0 closed, 1
	// half-open, 2 open.
	Breaker int `json:"breaker"`
	// Lag is the workers' consumer group lag in messages, LagBefore the
	// one measured a window earlier; -1 when the process does not measure
	// it.
	Lag       int64 `json:"lag"`
	LagBefore int64 `json:"lag_before"`
}

// Fleet is the fleet's samples folded into one.
type Fleet struct {
	// Samples is how many fresh samples were folded.
	Samples int
	// BuyP99 is the highest, Buys and Failed the sums, Breaker the worst.
	BuyP99       time.Duration
	Buys, Failed int64
	Breaker      int
	// Lag and LagBefore are the largest lag measured and the measurement
	// before it in the same sample; -1 when no fresh sample has a lag.
	Lag, LagBefore int64
}

// Board is the fleet's samples in Redis. It is safe for concurrent use.
type Board struct {
	rdb redis.UniversalClient
	now func() time.Time
}

// NewBoard returns the board on rdb.
func NewBoard(rdb redis.UniversalClient) *Board { return &Board{rdb: rdb, now: time.Now} }

// Publish records s as process id's sample.
func (b *Board) Publish(ctx context.Context, id string, s Sample) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("fleethealth: %w", err)
	}
	if err := b.rdb.HSet(ctx, Key, id, raw).Err(); err != nil {
		return fmt.Errorf("fleethealth: publish: %w: %w", apperr.ErrUnavailable, err)
	}
	return nil
}

// Read folds the fresh samples of the fleet into one, and deletes the
// samples older than Forget.
func (b *Board) Read(ctx context.Context) (Fleet, error) {
	all, err := b.rdb.HGetAll(ctx, Key).Result()
	if err != nil {
		return Fleet{}, fmt.Errorf("fleethealth: read: %w: %w", apperr.ErrUnavailable, err)
	}
	now := b.now()
	f := Fleet{Lag: -1, LagBefore: -1}
	var stale []string
	for id, raw := range all {
		var s Sample
		if err := json.Unmarshal([]byte(raw), &s); err != nil || now.Sub(s.At) > Forget {
			stale = append(stale, id)
			continue
		}
		if now.Sub(s.At) > Fresh {
			continue
		}
		f.Samples++
		f.BuyP99 = max(f.BuyP99, s.BuyP99)
		f.Buys += s.Buys
		f.Failed += s.Failed
		f.Breaker = max(f.Breaker, s.Breaker)
		if s.Lag > f.Lag {
			f.Lag, f.LagBefore = s.Lag, s.LagBefore
		}
	}
	if len(stale) > 0 {
		// Best effort: the next reader tries again.
		_ = b.rdb.HDel(ctx, Key, stale...).Err()
	}
	return f, nil
}

// Publisher publishes one process's sample every interval.
type Publisher struct {
	board   *Board
	id      string
	measure func(ctx context.Context) Sample
	every   time.Duration
	log     *slog.Logger
}

// PublisherConfig is what NewPublisher builds a Publisher from; a zero
// field means its default.
type PublisherConfig struct {
	// Board is where the samples go.
	Board *Board
	// ID names the process in the fleet, unique to it.
	ID string
	// Measure is the process's sample of the window since its last call.
	Measure func(ctx context.Context) Sample
	// Every is the interval (DefaultEvery).
	Every time.Duration
	// Log gets the failures (none: discarded).
	Log *slog.Logger
}

// NewPublisher returns the publisher of cfg. It starts nothing: Run does.
func NewPublisher(cfg PublisherConfig) *Publisher {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{board: cfg.Board, id: cfg.ID, measure: cfg.Measure, every: cfg.Every, log: cfg.Log.With("component", "fleethealth")}
}

// Run measures and publishes every interval until ctx ends, then returns
// nil: a failed publish is logged and the next one tried.
func (p *Publisher) Run(ctx context.Context) error {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s := p.measure(ctx)
			if s.At.IsZero() {
				s.At = time.Now()
			}
			if err := p.board.Publish(ctx, p.id, s); err != nil && ctx.Err() == nil {
				p.log.Warn("fleethealth: cannot publish this process's health", "err", err)
			}
		}
	}
}
