package redisstock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Truth is one voucher's state as PostgreSQL records it: what Rebuild writes
// back into Redis.
type Truth struct {
	// Voucher gives meta: window, per-user limit, price, StockTotal, and
	// StockLeft, what may still be sold (PostgreSQL's stock_left minus the
	// InFlight quantities, which PostgreSQL has not decremented yet).
	Voucher seckill.Voucher
	// Holds are persisted orders that keep their stock (created, paid).
	Holds []seckill.Reservation
	// InFlight are reservations not yet persisted whose messages are still
	// on their way to the workers; they keep their stock and go back into
	// the pending set (scored by ReservedAt) for the reconciler to watch,
	// undecided (see Promise) until a worker persists them.
	InFlight []seckill.Reservation
	// Released are orders that gave their stock back (cancelled, failed).
	// They become tombstones, and their request keys keep answering with
	// them, as after a release in mode ReleaseAny.
	Released []seckill.Reservation
	// Fence, when set, is a HealLock's token: the rebuild commits only while
	// that lease still holds the voucher's heal lock.
	Fence string
}

// rebuildAttempts bounds the optimistic retries of Rebuild.
const rebuildAttempts = 5

// rebuildChunk bounds the fields of one HSET, so no single command is huge.
const rebuildChunk = 1000

// Rebuild replaces everything Redis knows about one voucher with t, in one
// MULTI/EXEC under WATCH: a reserve or release that lands while Rebuild reads
// the old keys makes it start over, and readers see either the old state or
// the new one, never a mix. meta is written last inside the transaction.
//
// Rebuild cannot know about reservations PostgreSQL has never seen; the caller
// passes them as InFlight, or rebuilds only once the queue is drained. The safe
// order for a voucher that is still selling is: Unwarm (nothing can be
// reserved), drain or collect what is in flight, read PostgreSQL, Rebuild.
// After Redis lost its data there is no meta, so the voucher is already off
// sale. t must balance: StockLeft plus the quantities of Holds and InFlight is
// StockTotal (ErrInvalidInput otherwise); ErrConflict when the voucher kept
// changing under every attempt.
//
// A voucher of K = t.Voucher.ShardCount() > 1 buckets is rebuilt bucket by
// bucket (a transaction cannot span two slots): each hold, tombstone and
// request key goes to its user's home bucket, the stock left is split evenly,
// and each bucket's total is its stock plus its holds. Buckets are written
// from the last to bucket 0, each under its own WATCH. A fenced rebuild is
// checked inside every bucket's own transaction against the fencing number
// that bucket last saw (see rebuildBucket): a healer that stalled past its
// lease is refused in every bucket the next healer wrote. Every bucket gets
// a new epoch, so a move begun before the rebuild can never be credited
// after it.
func (s *Store) Rebuild(ctx context.Context, t Truth) error {
	if err := t.check(); err != nil {
		return err
	}
	n := t.Voucher.ShardCount()
	expire := s.expireAt(t.Voucher)
	shards := VoucherKeys(t.Voucher.ID).Shards
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, shards, n, 0)
		p.PExpireAt(ctx, shards, expire)
		return nil
	})
	if err != nil {
		return unavailable("rebuild", err)
	}
	s.shards.Store(t.Voucher.ID, n)
	if n == 1 {
		return s.rebuildBucket(ctx, VoucherKeys(t.Voucher.ID), t, nil)
	}
	parts := t.buckets(n)
	extra := []any{"out", 0, "in", 0, "rels", 0, "epoch", "r" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	for b := n - 1; b >= 0; b-- {
		if err := s.rebuildBucket(ctx, BucketKeys(t.Voucher.ID, b), parts[b], extra); err != nil {
			return err
		}
	}
	return nil
}

// buckets splits t over n buckets: the orders by their user's home bucket,
// the stock left evenly; each bucket's total is its stock plus its holds.
func (t Truth) buckets(n int) []Truth {
	lefts := split(t.Voucher.StockLeft, n)
	out := make([]Truth, n)
	for b := range out {
		out[b] = Truth{Voucher: t.Voucher, Fence: t.Fence}
		out[b].Voucher.StockLeft, out[b].Voucher.StockTotal = lefts[b], lefts[b]
	}
	for _, r := range t.Holds {
		p := &out[homeBucket(r.UserID, n)]
		p.Holds = append(p.Holds, r)
		p.Voucher.StockTotal += r.Quantity
	}
	for _, r := range t.InFlight {
		p := &out[homeBucket(r.UserID, n)]
		p.InFlight = append(p.InFlight, r)
		p.Voucher.StockTotal += r.Quantity
	}
	for _, r := range t.Released {
		p := &out[homeBucket(r.UserID, n)]
		p.Released = append(p.Released, r)
	}
	return out
}

// rebuildBucket replaces one bucket's keys with t (already checked), in one
// MULTI/EXEC under WATCH; extra are more meta fields.
//
// The fence rule, for a fenced t: the bucket's Fence key (in the bucket's
// own slot) holds the highest fencing number that rebuilt the bucket; the
// write is refused when that number is above t's, and the transaction sets
// it to t's. Fence is watched, so the comparison and the write are one
// atomic step: a later healer writing the bucket in between aborts the EXEC,
// and the retry sees its number. Numbers only grow (lua/heal_lock.lua), so
// once a later lease has written a bucket no earlier lease ever writes it
// again, however long it stalled, and the later healer, which writes every
// bucket, overwrites whatever an earlier one wrote before it stalled.
// Bucket 0 also checks the lease itself under WATCH (the heal lock's slot):
// a healer whose lease was taken commits nothing there, even before the new
// owner wrote. The plain look at the lease before the other buckets only
// spares a doomed write; it is not the guarantee (it cannot be atomic with a
// write to another slot).
func (s *Store) rebuildBucket(ctx context.Context, k Keys, t Truth, extra []any) error {
	fence, err := fenceNumber(t.Fence)
	if err != nil {
		return err
	}
	watched := k.fixed()
	if fence > 0 {
		watched = append(watched, k.Fence)
		if k.Bucket == 0 {
			watched = append(watched, k.Heal)
		}
	}
	expire := s.expireAt(t.Voucher)
	for range rebuildAttempts {
		if fence > 0 && k.Bucket != 0 {
			if err := s.checkFence(ctx, s.rdb, k, t.Fence); err != nil {
				return err
			}
		}
		err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			if fence > 0 {
				if err := s.checkBucketFence(ctx, tx, k, t.Fence, fence); err != nil {
					return err
				}
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				writeTruth(ctx, p, k, t, expire, extra)
				if fence > 0 {
					p.Set(ctx, k.Fence, fence, 0)
					p.PExpireAt(ctx, k.Fence, expire)
				}
				return nil
			})
			return err
		}, watched...)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		if err != nil {
			if errors.Is(err, apperr.ErrUnavailable) || errors.Is(err, errFenceLost) {
				return err
			}
			return unavailable("rebuild", err)
		}
		return nil
	}
	return fmt.Errorf("%w: voucher %d changed under %d rebuild attempts; take it off sale first",
		apperr.ErrConflict, t.Voucher.ID, rebuildAttempts)
}

// checkBucketFence returns errFenceLost when a later lease than fence (token
// in full) rebuilt bucket k, or, in bucket 0, when the lease is no longer
// token. c is the transaction watching both keys.
func (s *Store) checkBucketFence(ctx context.Context, c redis.Cmdable, k Keys, token string, fence int64) error {
	if k.Bucket == 0 {
		if err := s.checkFence(ctx, c, k, token); err != nil {
			return err
		}
	}
	cur, err := c.Get(ctx, k.Fence).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("rebuild fence", err)
	}
	if cur > fence {
		return errFenceLost
	}
	return nil
}

// checkFence returns errFenceLost unless the heal lock still holds fence.
func (s *Store) checkFence(ctx context.Context, c redis.Cmdable, k Keys, fence string) error {
	cur, err := c.Get(ctx, k.Heal).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("rebuild fence", err)
	}
	if cur != fence {
		return errFenceLost
	}
	return nil
}

// check validates t before anything is written.
func (t Truth) check() error {
	v := t.Voucher
	if err := checkVoucher(v); err != nil {
		return err
	}
	seen := map[int64]bool{}
	held := int64(0)
	for i, list := range [][]seckill.Reservation{t.Holds, t.InFlight, t.Released} {
		for _, r := range list {
			switch {
			case r.VoucherID != v.ID:
				return fmt.Errorf("%w: order %d is of voucher %d, not %d", apperr.ErrInvalidInput, r.OrderID, r.VoucherID, v.ID)
			case r.OrderID <= 0 || r.UserID <= 0 || r.Quantity < 1:
				return fmt.Errorf("%w: order %d needs positive ids and quantity", apperr.ErrInvalidInput, r.OrderID)
			case len(r.RequestKey) > seckill.MaxRequestKey:
				return fmt.Errorf("%w: order %d has a request key longer than %d", apperr.ErrInvalidInput, r.OrderID, seckill.MaxRequestKey)
			case seen[r.OrderID]:
				return fmt.Errorf("%w: order %d listed twice", apperr.ErrInvalidInput, r.OrderID)
			}
			seen[r.OrderID] = true
			if i < 2 {
				held += r.Quantity
			}
		}
	}
	if v.StockLeft+held != v.StockTotal {
		return fmt.Errorf("%w: voucher %d does not balance: left %d + held %d != total %d",
			apperr.ErrInvalidInput, v.ID, v.StockLeft, held, v.StockTotal)
	}
	return nil
}

// writeTruth queues the replacement of a voucher's keys by t. Every key
// written expires at expire, as warm.lua sets it, and the ledger and pending
// get their sentinels (see lua/reserve.lua). Released orders enter the
// recent releases as of now, so their tombstones and request keys are
// forgotten one idempotency window after the rebuild.
func writeTruth(ctx context.Context, p redis.Pipeliner, k Keys, t Truth, expire time.Time, extra []any) {
	p.Unlink(ctx, k.fixed()...)
	now := time.Now()
	ledger := []any{"_", 1}
	var pending, recent []redis.Z
	var held, holds int64
	type buyer struct {
		qty int64
		ids []string
	}
	buyers := map[int64]*buyer{}
	live := func(r seckill.Reservation) {
		if r.ReservedAt.IsZero() {
			r.ReservedAt = now
		}
		ledger = append(ledger, orderField(r.OrderID), holdEntry(r))
		held += r.Quantity
		holds++
		b := buyers[r.UserID]
		if b == nil {
			b = &buyer{}
			buyers[r.UserID] = b
		}
		b.qty += r.Quantity
		b.ids = append(b.ids, orderField(r.OrderID))
	}
	for _, r := range t.Holds {
		live(r)
	}
	for _, r := range t.InFlight {
		live(r)
		if r.RequestKey != "" {
			// Its gateway may still be deciding it (see Promise): a replay
			// waits until a worker persists it, as for any undecided hold.
			ledger = append(ledger, undecidedField(r.OrderID), 1)
		}
		at := r.ReservedAt
		if at.IsZero() {
			at = now
		}
		pending = append(pending, redis.Z{Score: float64(at.UnixMilli()), Member: r.OrderID})
	}
	pending = append(pending, redis.Z{Score: math.Inf(1), Member: pendingSentinel})
	for _, r := range t.Released {
		ledger = append(ledger, orderField(r.OrderID), "x")
		field := ""
		if r.RequestKey != "" {
			field = Request{UserID: r.UserID, Key: r.RequestKey}.reqField()
		}
		recent = append(recent, redis.Z{Score: float64(now.UnixMilli()), Member: orderField(r.OrderID) + ":" + field})
	}
	for _, list := range [][]seckill.Reservation{t.Holds, t.InFlight, t.Released} {
		for _, r := range list {
			if r.RequestKey != "" {
				ledger = append(ledger, Request{UserID: r.UserID, Key: r.RequestKey}.reqField(), r.OrderID)
			}
		}
	}
	for u, b := range buyers {
		ledger = append(ledger, userField(u), strconv.FormatInt(b.qty, 10)+" "+strings.Join(b.ids, " "))
	}
	for i := 0; i < len(ledger); i += 2 * rebuildChunk {
		p.HSet(ctx, k.Ledger, ledger[i:min(i+2*rebuildChunk, len(ledger))]...)
	}
	for i := 0; i < len(pending); i += rebuildChunk {
		p.ZAdd(ctx, k.Pending, pending[i:min(i+rebuildChunk, len(pending))]...)
	}
	for i := 0; i < len(recent); i += rebuildChunk {
		p.ZAdd(ctx, k.Released, recent[i:min(i+rebuildChunk, len(recent))]...)
	}
	p.HSet(ctx, k.Meta, "stock", t.Voucher.StockLeft, "total", t.Voucher.StockTotal,
		"begin_ms", t.Voucher.BeginAt.UnixMilli(), "end_ms", t.Voucher.EndAt.UnixMilli(),
		"limit", t.Voucher.PerUserLimit, "price", t.Voucher.PriceCents,
		"held", held, "holds", holds, "expire_ms", expire.UnixMilli())
	if len(extra) > 0 {
		p.HSet(ctx, k.Meta, extra...)
	}
	for _, key := range k.fixed() {
		p.PExpireAt(ctx, key, expire) // a key not written stays absent: PEXPIREAT does nothing
	}
}
