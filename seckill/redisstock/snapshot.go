package redisstock

// Reading a voucher's whole Redis state in one script, for drift checks.

import (
	"context"
	"fmt"
	"time"
)

// Snapshot is one consistent read of a voucher's Redis state.
type Snapshot struct {
	// OnSale is false when the voucher has no meta in Redis (never warmed,
	// unwarmed, or lost with Redis's data); the counts are then what is left
	// of the other keys.
	OnSale bool
	// Left is meta's stock; Total its total.
	Left, Total int64
	// Held is the sum of the live holds' quantities; Holds their count
	// (counters the scripts keep in meta).
	Held, Holds int64
	// Pending counts holds no worker has confirmed yet.
	Pending int64
}

// Balanced reports whether the snapshot obeys the invariant Redis keeps:
// left + held == total.
func (s Snapshot) Balanced() bool {
	return s.Left+s.Held == s.Total && s.Left >= 0 && s.Holds >= 0
}

// Snapshot reads a voucher's state atomically (snapshot.lua) in O(1): the
// scripts keep the holds' counters, so an operator page asking every two
// seconds costs Redis nothing however long the sale ran.
func (s *Store) Snapshot(ctx context.Context, voucherID int64) (Snapshot, error) {
	k := VoucherKeys(voucherID)
	start := time.Now()
	raw, err := s.snapshot.Run(ctx, s.rdb, []string{k.Meta, k.Pending}).Int64Slice()
	s.metrics.since(scriptSnapshot, start)
	if err != nil {
		return Snapshot{}, unavailable("snapshot", err)
	}
	if len(raw) != 6 {
		return Snapshot{}, fmt.Errorf("snapshot.lua: reply of %d values", len(raw))
	}
	return Snapshot{
		OnSale: raw[0] == 1, Left: raw[1], Total: raw[2],
		Held: raw[3], Holds: raw[4], Pending: raw[5],
	}, nil
}
