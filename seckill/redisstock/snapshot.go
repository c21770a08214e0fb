package redisstock

// Reading a voucher's whole Redis state in one script, for drift checks.

import (
	"context"
	"fmt"
	"time"
)

// Snapshot is one read of a voucher's Redis state: consistent for a voucher
// of one bucket (one script); for several buckets, the sum of one consistent
// read per bucket.
type Snapshot struct {
	// OnSale is false when the voucher has no meta in Redis, in some bucket
	// (never warmed, unwarmed, or lost with Redis's data); the counts are
	// then what is left of the other keys.
	OnSale bool
	// Left is meta's stock (summed over the buckets, the stock on its way
	// between buckets included); Total its total.
	Left, Total int64
	// Held is the sum of the live holds' quantities; Holds their count
	// (counters the scripts keep in meta).
	Held, Holds int64
	// Pending counts holds no worker has confirmed yet.
	Pending int64
	// Moving is the stock on its way between two buckets (a move whose
	// second step has not run yet; part of Left).
	Moving int64
	// skewed: some bucket on sale broke stock + held + out - in = its total.
	skewed bool
}

// Balanced reports whether the snapshot obeys the invariant Redis keeps:
// left + held == total (and, per bucket, stock + held + out - in == the
// bucket's total).
func (s Snapshot) Balanced() bool {
	return s.Left+s.Held == s.Total && s.Left >= 0 && s.Holds >= 0 && s.Moving >= 0 && !s.skewed
}

// Snapshot reads a voucher's state (snapshot.lua, once per bucket) in O(1)
// per bucket: the scripts keep the holds' counters, so an operator page
// asking every two seconds costs Redis nothing however long the sale ran.
func (s *Store) Snapshot(ctx context.Context, voucherID int64) (Snapshot, error) {
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return Snapshot{}, err
	}
	sum := Snapshot{OnSale: true}
	for b := range n {
		k := BucketKeys(voucherID, b)
		start := time.Now()
		raw, err := s.snapshot.Run(ctx, s.rdb, []string{k.Meta, k.Pending}).Int64Slice()
		s.metrics.since(scriptSnapshot, start)
		if err != nil {
			return Snapshot{}, unavailable("snapshot", err)
		}
		if len(raw) != 8 {
			return Snapshot{}, fmt.Errorf("snapshot.lua: reply of %d values", len(raw))
		}
		onSale, stock, total, held, holds, pending, out, in := raw[0] == 1, raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]
		sum.OnSale = sum.OnSale && onSale
		sum.Left += stock
		sum.Total += total
		sum.Held += held
		sum.Holds += holds
		sum.Pending += pending
		sum.Moving += out - in
		if onSale && (stock+held+out-in != total || stock < 0) {
			sum.skewed = true
		}
	}
	sum.Left += sum.Moving
	return sum, nil
}
