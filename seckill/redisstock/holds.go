package redisstock

// Reads of the live stock and holds, and the workers' and the reconciler's
// writes around them (Confirm, Pending).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// parseHold decodes an orders entry. live is false for the tombstone.
func parseHold(voucherID, orderID int64, entry string) (h seckill.Reservation, live bool, err error) {
	if entry == "x" {
		return h, false, nil
	}
	parts := strings.SplitN(entry, ":", 4)
	if len(parts) != 4 {
		return h, false, fmt.Errorf("redisstock: corrupt orders entry %q of order %d", entry, orderID)
	}
	user, err1 := strconv.ParseInt(parts[0], 10, 64)
	qty, err2 := strconv.ParseInt(parts[1], 10, 64)
	at, err3 := strconv.ParseInt(parts[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return h, false, fmt.Errorf("redisstock: corrupt orders entry %q of order %d: %w", entry, orderID, err)
	}
	return seckill.Reservation{
		OrderID:    orderID,
		VoucherID:  voucherID,
		UserID:     user,
		Quantity:   qty,
		RequestKey: parts[3],
		ReservedAt: time.UnixMilli(at).UTC(),
	}, true, nil
}

// holdEntry encodes an orders entry, the inverse of parseHold.
func holdEntry(r seckill.Reservation) string {
	return strconv.FormatInt(r.UserID, 10) + ":" + strconv.FormatInt(r.Quantity, 10) + ":" +
		strconv.FormatInt(r.ReservedAt.UnixMilli(), 10) + ":" + r.RequestKey
}

// StockLeft returns the live stock of each voucher that is on sale in Redis,
// in one pipelined round trip (two the first time a voucher is asked for: its
// bucket count). Vouchers that are not warmed are absent. For a voucher of
// several buckets it is the sum of their stock and of the stock on its way
// between them.
func (s *Store) StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error) {
	if len(voucherIDs) == 0 {
		return map[int64]int64{}, nil
	}
	counts, err := s.shardCounts(ctx, voucherIDs)
	if err != nil {
		return nil, err
	}
	cmds := make([][]*redis.SliceCmd, len(voucherIDs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			for b := range counts[id] {
				cmds[i] = append(cmds[i], p.HMGet(ctx, BucketKeys(id, b).Meta, "stock", "out", "in"))
			}
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("stock left", err)
	}
	left := make(map[int64]int64, len(voucherIDs))
	for i, id := range voucherIDs {
		if cmds[i][0].Val()[0] == nil {
			continue // bucket 0 has no meta: not on sale
		}
		n := int64(0)
		for _, c := range cmds[i] {
			v := c.Val()
			n += intOf(v[0]) + intOf(v[1]) - intOf(v[2])
		}
		left[id] = n
	}
	return left, nil
}

// Hold finds the live hold of orderID among the given vouchers (the caller
// does not know which voucher an order id belongs to) in one pipelined round
// trip over every bucket of them. A hold stays live after a worker persisted
// it, until it is released, so a reader that checks PostgreSQL first and
// Redis second never misses an order that is being persisted between the two
// reads.
func (s *Store) Hold(ctx context.Context, orderID int64, voucherIDs []int64) (seckill.Reservation, bool, error) {
	if len(voucherIDs) == 0 {
		return seckill.Reservation{}, false, nil
	}
	counts, err := s.shardCounts(ctx, voucherIDs)
	if err != nil {
		return seckill.Reservation{}, false, err
	}
	field := orderField(orderID)
	type ask struct {
		voucherID int64
		cmd       *redis.StringCmd
	}
	var asks []ask
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, id := range voucherIDs {
			for b := range counts[id] {
				asks = append(asks, ask{id, p.HGet(ctx, BucketKeys(id, b).Ledger, field)})
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return seckill.Reservation{}, false, unavailable("hold", err)
	}
	for _, a := range asks {
		entry, err := a.cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return seckill.Reservation{}, false, unavailable("hold", err)
		}
		h, live, err := parseHold(a.voucherID, orderID, entry)
		if err != nil || live {
			return h, live, err
		}
	}
	return seckill.Reservation{}, false, nil
}

// UserHolds returns the live holds of one user among the given vouchers,
// newest first (order ids are time-ordered), in two pipelined round trips.
// A user's holds of a voucher of several buckets are all in the user's home
// bucket. Persisted holds are included (see Hold); callers that merge with
// PostgreSQL let PostgreSQL's row win for an order id found in both.
func (s *Store) UserHolds(ctx context.Context, userID int64, voucherIDs []int64) ([]seckill.Reservation, error) {
	if len(voucherIDs) == 0 {
		return nil, nil
	}
	counts, err := s.shardCounts(ctx, voucherIDs)
	if err != nil {
		return nil, err
	}
	home := func(id int64) Keys { return BucketKeys(id, homeBucket(userID, counts[id])) }
	mine := make([]*redis.StringCmd, len(voucherIDs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			mine[i] = p.HGet(ctx, home(id).Ledger, userField(userID))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("user holds", err)
	}
	type ask struct {
		voucherID int64
		orderIDs  []string
		cmd       *redis.SliceCmd
	}
	var asks []*ask
	for i, c := range mine {
		// "qty orderID orderID ...": the ids follow the user's count.
		if f := strings.Fields(c.Val()); len(f) > 1 {
			asks = append(asks, &ask{voucherID: voucherIDs[i], orderIDs: f[1:]})
		}
	}
	if len(asks) == 0 {
		return nil, nil
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range asks {
			a.cmd = p.HMGet(ctx, home(a.voucherID).Ledger, a.orderIDs...)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("user holds", err)
	}
	var out []seckill.Reservation
	for _, a := range asks {
		got, err := liveHolds(a.voucherID, a.orderIDs, a.cmd.Val())
		if err != nil {
			return nil, err
		}
		for _, h := range got {
			// The user's field and the orders are read apart; the
			// orders are the truth.
			if h.UserID == userID {
				out = append(out, h)
			}
		}
	}
	sortNewestFirst(out)
	return out, nil
}

// liveHolds decodes HMGET answers of orders for ids, skipping missing
// entries and tombstones (released between two reads).
func liveHolds(voucherID int64, ids []string, vals []any) ([]seckill.Reservation, error) {
	out := make([]seckill.Reservation, 0, len(ids))
	for j, v := range vals {
		entry, ok := v.(string)
		if !ok {
			continue
		}
		oid, err := strconv.ParseInt(ids[j], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redisstock: bad order id %q in voucher %d", ids[j], voucherID)
		}
		h, live, err := parseHold(voucherID, oid, entry)
		if err != nil {
			return nil, err
		}
		if live {
			out = append(out, h)
		}
	}
	return out, nil
}

func sortNewestFirst(rs []seckill.Reservation) {
	slices.SortFunc(rs, func(a, b seckill.Reservation) int { return cmp.Compare(b.OrderID, a.OrderID) })
}

// Confirm tells Redis that workers persisted these reservations: they leave
// the pending set (and keep holding their stock), one ZREM per bucket, all in
// one pipelined round trip. Workers call it after their PostgreSQL commit; it
// is idempotent, and a failed Confirm only leaves work for the reconciler,
// which must find the order in PostgreSQL before it releases anything. A
// persisted order's fate is decided, so the keyed ones' undecided fields go
// too (one HDEL per bucket, in the same round trip): a gateway that died
// between its write and its promise leaves none behind.
func (s *Store) Confirm(ctx context.Context, rs []seckill.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	var ids []int64
	for _, r := range rs {
		ids = append(ids, r.VoucherID)
	}
	counts, err := s.shardCounts(ctx, ids)
	if err != nil {
		return err
	}
	byBucket := map[string][]any{}
	decided := map[string][]string{} // ledger -> undecided fields
	var order, ledgers []string
	for _, r := range rs {
		k := BucketKeys(r.VoucherID, homeBucket(r.UserID, counts[r.VoucherID]))
		if _, ok := byBucket[k.Pending]; !ok {
			order = append(order, k.Pending)
		}
		byBucket[k.Pending] = append(byBucket[k.Pending], r.OrderID)
		if r.RequestKey != "" {
			if _, ok := decided[k.Ledger]; !ok {
				ledgers = append(ledgers, k.Ledger)
			}
			decided[k.Ledger] = append(decided[k.Ledger], undecidedField(r.OrderID))
		}
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range order {
			p.ZRem(ctx, key, byBucket[key]...)
		}
		for _, key := range ledgers {
			p.HDel(ctx, key, decided[key]...)
		}
		return nil
	})
	if err != nil {
		return unavailable("confirm", err)
	}
	return nil
}

// Pending returns up to max holds of a voucher (of all its buckets) that no
// worker has confirmed and that were reserved before reservedBefore, oldest
// first. Reservation times are Redis server time (reserve.lua reads TIME), so
// compute reservedBefore from Redis TIME too when hosts' clocks may disagree.
func (s *Store) Pending(ctx context.Context, voucherID int64, reservedBefore time.Time, max int) ([]seckill.Reservation, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: max must be positive", apperr.ErrInvalidInput)
	}
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	var out []seckill.Reservation
	for b := range n {
		got, err := s.pendingIn(ctx, voucherID, BucketKeys(voucherID, b), reservedBefore, max)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(out) == 0 {
		return nil, nil
	}
	// Redis orders equal scores by member as text ("12" before "9"); the
	// order ids say which came first within one millisecond.
	slices.SortStableFunc(out, func(a, b seckill.Reservation) int {
		return cmp.Or(a.ReservedAt.Compare(b.ReservedAt), cmp.Compare(a.OrderID, b.OrderID))
	})
	return out[:min(len(out), max)], nil
}

// pendingIn is Pending of one bucket, unsorted.
func (s *Store) pendingIn(ctx context.Context, voucherID int64, k Keys, reservedBefore time.Time, max int) ([]seckill.Reservation, error) {
	ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{
		Key:     k.Pending,
		Start:   "-inf",
		Stop:    "(" + strconv.FormatInt(reservedBefore.UnixMilli(), 10),
		ByScore: true,
		Count:   int64(max),
	}).Result()
	if err != nil {
		return nil, unavailable("pending", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	vals, err := s.rdb.HMGet(ctx, k.Ledger, ids...).Result()
	if err != nil {
		return nil, unavailable("pending", err)
	}
	return liveHolds(voucherID, ids, vals)
}
