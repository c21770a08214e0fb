package redisstock

// Putting a voucher on sale in Redis (Warm) and taking it off (Unwarm).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// checkVoucher checks what Warm and Rebuild write into meta.
func checkVoucher(v seckill.Voucher) error {
	switch {
	case v.ID <= 0:
		return fmt.Errorf("%w: voucher id must be positive", apperr.ErrInvalidInput)
	case v.StockTotal < 1 || v.StockTotal > seckill.MaxStock:
		return fmt.Errorf("%w: stock total must be 1 to %d", apperr.ErrInvalidInput, seckill.MaxStock)
	case v.StockLeft < 0 || v.StockLeft > v.StockTotal:
		return fmt.Errorf("%w: stock left must be 0 to the total", apperr.ErrInvalidInput)
	case v.PerUserLimit < 1:
		return fmt.Errorf("%w: per-user limit must be positive", apperr.ErrInvalidInput)
	case v.PriceCents < 0:
		return fmt.Errorf("%w: price must not be negative", apperr.ErrInvalidInput)
	case v.BeginAt.IsZero() || !v.EndAt.After(v.BeginAt):
		return fmt.Errorf("%w: the sale window must end after it begins", apperr.ErrInvalidInput)
	}
	return nil
}

// metaArgs is meta's fields in warm.lua's ARGV order.
func (s *Store) metaArgs(v seckill.Voucher) []any {
	return []any{v.StockLeft, v.StockTotal, v.BeginAt.UnixMilli(), v.EndAt.UnixMilli(), v.PerUserLimit, v.PriceCents,
		s.expireAt(v).UnixMilli()}
}

// expireAt is when a voucher's Redis state expires: its end plus the grace.
func (s *Store) expireAt(v seckill.Voucher) time.Time { return v.EndAt.Add(s.grace) }

// Warm puts a seckill voucher on sale: meta gets stock = v.StockLeft, total,
// the window in unix ms, the per-user limit and the price. Warming the same
// voucher again with the same total, window, limit and price does nothing and
// keeps its live stock (a retried call is harmless); with different values it
// returns ErrConflict, because overwriting a selling voucher's stock oversells.
//
// A voucher of v.ShardCount() = K > 1 buckets gets K meta hashes, the stock
// and the total split evenly (the remainder to the first buckets). The bucket
// count is written first (Keys.Shards), so every reader finds all buckets.
func (s *Store) Warm(ctx context.Context, v seckill.Voucher) error {
	if err := checkVoucher(v); err != nil {
		return err
	}
	n := v.ShardCount()
	if err := s.claimShards(ctx, v.ID, n, s.expireAt(v)); err != nil {
		return err
	}
	lefts, totals := split(v.StockLeft, n), split(v.StockTotal, n)
	for b := range n {
		bv := v
		bv.StockLeft, bv.StockTotal = lefts[b], totals[b]
		args := s.metaArgs(bv)
		if n > 1 {
			args = append(args, warmEpoch)
		}
		start := time.Now()
		got, err := s.warm.Run(ctx, s.rdb, BucketKeys(v.ID, b).script(), args...).Int64()
		s.metrics.since(scriptWarm, start)
		if err != nil {
			return unavailable("warm", err)
		}
		if got < 0 {
			return fmt.Errorf("%w: voucher %d is already on sale in Redis with other values", apperr.ErrConflict, v.ID)
		}
	}
	return nil
}

// warmEpoch is the epoch of buckets written by Warm (a rebuild writes a new
// one, see move_in.lua). It is fixed, so a retried Warm that completes a
// half-written voucher gives every bucket the same epoch.
const warmEpoch = "w"

// claimShards writes the voucher's bucket count unless it is there; a
// different count there is ErrConflict.
func (s *Store) claimShards(ctx context.Context, id int64, n int, expire time.Time) error {
	key := VoucherKeys(id).Shards
	err := s.rdb.SetArgs(ctx, key, n, redis.SetArgs{Mode: "NX", ExpireAt: expire}).Err()
	if err == nil {
		s.shards.Store(id, n)
		return nil
	}
	if !errors.Is(err, redis.Nil) {
		return unavailable("warm", err)
	}
	cur, err := s.rdb.Get(ctx, key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("warm", err)
	}
	if err == nil && cur != n {
		return fmt.Errorf("%w: voucher %d is already on sale in Redis with %d shards, not %d", apperr.ErrConflict, id, cur, n)
	}
	s.shards.Store(id, n)
	return nil
}

// Unwarm takes a voucher off sale and forgets everything Redis knows about it
// (holds, buyers, request keys, tombstones, moves, in every bucket). It is for
// a voucher whose creation failed after Warm, and for clearing a voucher
// before Rebuild. The meta hashes go first, so no reservation can succeed
// while the rest is deleted; the bucket count goes last.
func (s *Store) Unwarm(ctx context.Context, voucherID int64) error {
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return err
	}
	if err := s.TakeOffSale(ctx, voucherID); err != nil {
		return fmt.Errorf("unwarm: %w", err)
	}
	for b := range n {
		if err := s.rdb.Unlink(ctx, BucketKeys(voucherID, b).fixed()...).Err(); err != nil {
			return unavailable("unwarm", err)
		}
	}
	if err := s.rdb.Unlink(ctx, VoucherKeys(voucherID).Shards).Err(); err != nil {
		return unavailable("unwarm", err)
	}
	return nil
}
