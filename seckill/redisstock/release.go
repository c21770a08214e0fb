package redisstock

// Giving a reservation's stock back: release.lua, and what its answers mean.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// ReleaseStatus is what release.lua did.
type ReleaseStatus int

// Answers of release.lua, in its return codes.
const (
	// NothingReleased: the order is unknown here or was released before.
	NothingReleased ReleaseStatus = 0
	// Released: this call gave the stock back.
	Released ReleaseStatus = 1
	// AlreadyConfirmed: mode ReleaseIfPending found that a worker had
	// persisted the order, so it still holds its stock.
	AlreadyConfirmed ReleaseStatus = 2
)

// Release gives a reservation's stock back, at most once per order; see
// seckill.Stock. It is false when there was nothing to release, and also when
// mode is ReleaseIfPending and a worker already confirmed the order (use
// ReleaseStatus to tell the two apart).
func (s *Store) Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	st, err := s.ReleaseStatus(ctx, voucherID, orderID, mode)
	return st == Released, err
}

// ReleaseStatus is Release with the full answer of release.lua. It takes two
// round trips: the first finds the bucket whose ledger has the order (a
// voucher of several buckets) and its owner, whom the script checks again.
// That read cannot go stale: an order id's entry only ever moves from live to
// "x". The stock goes back to the bucket the hold was taken from.
func (s *Store) ReleaseStatus(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (ReleaseStatus, error) {
	var m string
	switch mode {
	case seckill.ReleaseAny:
		m = "any"
	case seckill.ReleaseUnsent:
		m = "unsent"
	case seckill.ReleaseIfPending:
		m = "ifpending"
	case seckill.ReleaseRefused:
		m = "refused"
	default:
		return NothingReleased, fmt.Errorf("%w: release mode %d", apperr.ErrInvalidInput, mode)
	}
	if voucherID <= 0 || orderID <= 0 {
		return NothingReleased, fmt.Errorf("%w: release needs positive voucher and order ids", apperr.ErrInvalidInput)
	}
	shards, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return NothingReleased, err
	}
	k, entry, found, err := s.findOrder(ctx, voucherID, shards, orderID)
	if err != nil || !found {
		return NothingReleased, err
	}
	h, live, err := parseHold(voucherID, orderID, entry)
	if err != nil || !live {
		return NothingReleased, err
	}
	counted := ""
	if shards > 1 {
		counted = "1"
	}
	start := time.Now()
	n, err := s.release.Run(ctx, s.rdb, k.releaseScript(), orderID, m, h.UserID, s.window.Milliseconds(), counted).Int64()
	s.metrics.since(scriptRelease, start)
	if err != nil {
		return NothingReleased, unavailable("release", err)
	}
	switch st := ReleaseStatus(n); st {
	case Released:
		s.announceStock(ctx, voucherID)
		return st, nil
	case NothingReleased, AlreadyConfirmed:
		return st, nil
	}
	return NothingReleased, fmt.Errorf("release.lua: unknown code %d", n)
}

// findOrder finds the bucket whose ledger has orderID (one HGET per
// bucket, pipelined) and its entry, a live one first.
func (s *Store) findOrder(ctx context.Context, voucherID int64, n int, orderID int64) (Keys, string, bool, error) {
	field := orderField(orderID)
	cmds := make([]*redis.StringCmd, n)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			cmds[b] = p.HGet(ctx, BucketKeys(voucherID, b).Ledger, field)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Keys{}, "", false, unavailable("release", err)
	}
	var k Keys
	var entry string
	found := false
	for b, c := range cmds {
		e, err := c.Result()
		if err != nil {
			continue
		}
		if !found || e != "x" {
			k, entry, found = BucketKeys(voucherID, b), e, true
		}
		if e != "x" {
			break
		}
	}
	return k, entry, found, nil
}
