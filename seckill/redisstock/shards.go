package redisstock

// A voucher with several shards: its stock spread over K buckets, each in its
// own hash slot, so one hot voucher uses many Redis nodes. deploy/OPERATING.md, "One hot
// voucher over many Redis nodes (shards)", explains the design:
//
//   - routing: a shopper buys only in the home bucket, user id mod K
//     (homeBucket, keys.go), so the per-user count and the Idempotency-Key's
//     order live in one bucket and stay exact without any script over two
//     slots;
//   - fallback: when the home bucket lacks stock, stock moves into it from
//     the richest other bucket (move_out.lua on the donor, move_in.lua on
//     the home bucket, each one slot; a half-done move is finished by the
//     next buyer who needs it or by the reconciler), then the buy is tried
//     again in the home bucket;
//   - sold out: only when two reads of every bucket, one after the other,
//     show too little stock in all of them together and the same release and
//     move counters (no stock came back in between), and no move is half done.
//
// The fallback and its sold-out rule are on Reserve's path (reserve.go);
// this file has the bucket count and the moves the fallback makes.
//
// Per bucket: stock + held + out - in = the bucket's total. Over the buckets,
// stock + held + (out - in, stock on its way between buckets) = the total.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
)

// shardCount returns voucher id's bucket count: from the cache, else from
// Keys.Shards (which TakeOffSale leaves, so it is known as long as any of the
// voucher's state is). A voucher without the key (not warmed, lost with
// Redis's data) counts as one bucket, and that answer is not cached: a
// rebuild writes the key again.
func (s *Store) shardCount(ctx context.Context, id int64) (int, error) {
	if n, ok := s.shards.Load(id); ok {
		return n.(int), nil
	}
	got, err := s.shardCounts(ctx, []int64{id})
	if err != nil {
		return 0, err
	}
	return got[id], nil
}

// shardCounts is shardCount of many vouchers, the ones not cached read in
// one pipelined round trip.
func (s *Store) shardCounts(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(ids))
	var ask []int64
	for _, id := range ids {
		if n, ok := s.shards.Load(id); ok {
			out[id] = n.(int)
		} else {
			ask = append(ask, id)
		}
	}
	if len(ask) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(ask))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ask {
			cmds[i] = p.Get(ctx, VoucherKeys(id).Shards)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("shard count", err)
	}
	for i, id := range ask {
		v, err := cmds[i].Int()
		switch {
		case errors.Is(err, redis.Nil):
			out[id] = 1
			continue
		case err != nil:
			return nil, fmt.Errorf("redisstock: shard count of voucher %d: %w", id, err)
		case v < 1 || v > seckill.MaxShards:
			return nil, fmt.Errorf("redisstock: voucher %d has the shard count %d, not 1 to %d", id, v, seckill.MaxShards)
		}
		s.shards.Store(id, v)
		out[id] = v
	}
	return out, nil
}

// split divides total over n buckets evenly, the remainder to the first.
func split(total int64, n int) []int64 {
	out := make([]int64, n)
	for b := range out {
		out[b] = total / int64(n)
		if int64(b) < total%int64(n) {
			out[b]++
		}
	}
	return out
}

// pull moves at least need (if it can) into bucket to from the richest other
// bucket: half of the donor's stock, so the next shoppers of bucket to find
// stock at home, and never less than need.
func (s *Store) pull(ctx context.Context, id int64, st []bucketState, to int, need int64) error {
	donor := -1
	for b := range st {
		if b != to && st[b].stock > 0 && (donor < 0 || st[b].stock > st[donor].stock) {
			donor = b
		}
	}
	if donor < 0 {
		return nil
	}
	want := max(need, (st[donor].stock+1)/2)
	_, err := s.move(ctx, st[donor].keys, BucketKeys(id, to), want)
	return err
}

// move moves up to want from bucket from to bucket to and returns how much
// moved: move_out.lua on the donor, then move_in.lua on the receiver, then the
// donor's record of the move is dropped. If the process dies in between,
// finishMoves completes it.
func (s *Store) move(ctx context.Context, from, to Keys, want int64) (int64, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	start := time.Now()
	raw, err := s.moveOut.Run(ctx, s.rdb, []string{from.Meta, from.Moves}, id, want, to.Bucket).Slice()
	s.metrics.since(scriptMove, start)
	if err != nil {
		return 0, unavailable("move stock out", err)
	}
	if len(raw) != 2 {
		return 0, fmt.Errorf("move_out.lua: reply of %d values", len(raw))
	}
	moved, err := toInt(raw[0])
	if err != nil {
		return 0, fmt.Errorf("move_out.lua: %w", err)
	}
	if moved == 0 {
		return 0, nil
	}
	epoch, _ := raw[1].(string)
	if _, err := s.credit(ctx, from, to, id, moved, epoch); err != nil {
		return 0, err
	}
	return moved, nil
}

// credit runs move_in.lua for move id and then drops the donor's record,
// unless the receiver is off sale (the record then waits for a rebuild, which
// replaces the voucher's state). It reports whether this call credited.
func (s *Store) credit(ctx context.Context, from, to Keys, id string, n int64, epoch string) (bool, error) {
	start := time.Now()
	code, err := s.moveIn.Run(ctx, s.rdb, []string{to.Meta, to.Credited}, id, n, epoch).Int64()
	s.metrics.since(scriptMove, start)
	if err != nil {
		return false, unavailable("move stock in", err)
	}
	if code != -1 {
		if err := s.rdb.HDel(ctx, from.Moves, id).Err(); err != nil {
			return false, unavailable("move stock: forget the record", err)
		}
	}
	return code == 1, nil
}

// FinishMoves completes the voucher's half-done moves of stock between
// buckets (the donor debited, the receiver not yet credited: the mover died
// or lost Redis between its two steps) and returns how many it credited. The
// reconciler calls it on every pass; buyers call it when they find stock on
// its way. A voucher of one bucket has none.
func (s *Store) FinishMoves(ctx context.Context, voucherID int64) (int, error) {
	n, err := s.shardCount(ctx, voucherID)
	if err != nil || n == 1 {
		return 0, err
	}
	return s.finishMoves(ctx, voucherID, n)
}

func (s *Store) finishMoves(ctx context.Context, id int64, n int) (int, error) {
	cmds := make([]*redis.MapStringStringCmd, n)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			cmds[b] = p.HGetAll(ctx, BucketKeys(id, b).Moves)
		}
		return nil
	})
	if err != nil {
		return 0, unavailable("finish moves", err)
	}
	credited := 0
	for b, c := range cmds {
		for mid, rec := range c.Val() {
			parts := strings.SplitN(rec, ":", 3)
			to, err1 := strconv.Atoi(parts[0])
			var q int64
			var err2 error = errors.New("short record")
			if len(parts) == 3 {
				q, err2 = strconv.ParseInt(parts[1], 10, 64)
			}
			if err := errors.Join(err1, err2); err != nil || to < 0 || to >= n {
				return credited, fmt.Errorf("redisstock: corrupt move record %q -> %q of voucher %d bucket %d", mid, rec, id, b)
			}
			ok, err := s.credit(ctx, BucketKeys(id, b), BucketKeys(id, to), mid, q, parts[2])
			if err != nil {
				return credited, err
			}
			if ok {
				credited++
			}
		}
	}
	return credited, nil
}
