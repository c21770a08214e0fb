// Package redisstock is the Redis side of the stock: the reservation scripts
// and the keys around them. It implements seckill.Stock (the atomic reserve and
// its release) and the reads and repairs the rest of the fleet needs: warming
// a voucher, live stock figures, holds by order or user, the workers' confirm,
// the reconciler's pending list, drift snapshots and a rebuild from PostgreSQL.
//
// The data model (one hash tag per voucher, see VoucherKeys):
//
//	seckill:{v42}:meta        hash  stock total begin_ms end_ms limit price
//	seckill:{v42}:buyers      hash  userID -> quantity held or bought
//	seckill:{v42}:reqs        hash  "userID:requestKey" -> orderID
//	seckill:{v42}:orders      hash  orderID -> "userID:qty:reservedAtMs:requestKey" | "x"
//	seckill:{v42}:pending     zset  orderID by reservedAtMs, until a worker confirms it
//	seckill:{v42}:user:<uid>  set   the user's live order ids
//
// A "live hold" is an orders entry that is not the tombstone "x": stock held
// for an order that is reserved, persisted or paid and was never released.
// Redis therefore keeps left + held == total for every voucher.
package redisstock

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

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
)

// Return codes of reserve.lua.
const (
	codeHeld       = 0
	codeReplay     = 1
	codeNotOnSale  = 2
	codeNotStarted = 3
	codeEnded      = 4
	codeSoldOut    = 5
	codeLimit      = 6
	codeIDTaken    = 7
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

// Store is the Redis stock. It is safe for concurrent use.
type Store struct {
	rdb redis.UniversalClient
	// hot is what reservations go through: GroupCommit(rdb) unless
	// WithoutGroupCommit.
	hot      redis.Scripter
	reserve  *redis.Script
	release  *redis.Script
	snapshot *redis.Script
	warm     *redis.Script
	metrics  *Metrics
	asks     healAsks
	// grace is how long after a sale's end its keys live; window how long
	// a released order's tombstone and request key are remembered.
	grace, window time.Duration
	// quiet: Release does not announce on StockChannel.
	quiet bool
}

// Defaults of WithStateGrace and WithIdempotencyWindow.
const (
	DefaultStateGrace        = time.Hour
	DefaultIdempotencyWindow = 10 * time.Minute
)

// New returns a Store over rdb (a client, a cluster client or a failover
// client: every multi-key command stays in one voucher's slot).
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	s := &Store{
		rdb:      rdb,
		reserve:  redis.NewScript(lua.Reserve),
		release:  redis.NewScript(lua.Release),
		snapshot: redis.NewScript(lua.Snapshot),
		warm:     redis.NewScript(lua.Warm),
		grace:    DefaultStateGrace,
		window:   DefaultIdempotencyWindow,
	}
	for _, o := range opts {
		o(s)
	}
	if s.hot == nil {
		s.hot = GroupCommit(rdb)
	}
	return s
}

var _ seckill.Stock = (*Store)(nil)

// unavailable wraps a Redis failure in the platform's sentinel.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", seckill.ErrUnavailable, what, err)
}

// Reserve runs reserve.lua (EVALSHA, EVAL when the server lost its script
// cache). See seckill.Stock. On a refusal the result still carries the
// voucher's StockLeft, so callers can tell "none left" from "not enough left".
// A retry of the very same reservation (same order id, user, quantity and key)
// answers like the first call; a known request key answers with the first
// order and Replayed set.
func (s *Store) Reserve(ctx context.Context, r seckill.Reservation) (seckill.ReserveResult, error) {
	switch {
	case r.VoucherID <= 0, r.UserID <= 0, r.OrderID <= 0:
		return seckill.ReserveResult{}, fmt.Errorf("%w: reserve needs positive voucher, user and order ids", seckill.ErrInvalidInput)
	case r.Quantity < 1 || r.Quantity > seckill.MaxQuantity:
		return seckill.ReserveResult{}, fmt.Errorf("%w: quantity must be 1 to %d", seckill.ErrInvalidInput, seckill.MaxQuantity)
	case len(r.RequestKey) > seckill.MaxRequestKey:
		return seckill.ReserveResult{}, fmt.Errorf("%w: request key longer than %d", seckill.ErrInvalidInput, seckill.MaxRequestKey)
	}
	k := VoucherKeys(r.VoucherID)
	start := time.Now()
	raw, err := s.reserve.Run(ctx, s.hot, k.script(r.UserID), r.UserID, r.OrderID, r.Quantity, r.RequestKey).Slice()
	s.metrics.since(scriptReserve, start)
	if err != nil {
		return seckill.ReserveResult{}, unavailable("reserve", err)
	}
	code, orderID, left, err := reserveReply(raw)
	if err != nil {
		return seckill.ReserveResult{}, err
	}
	return reserveOutcome(r, code, orderID, left)
}

// reserveOutcome is the one place that turns reserve.lua's codes into results
// and the seckill sentinel errors.
func reserveOutcome(r seckill.Reservation, code, orderID, left int64) (seckill.ReserveResult, error) {
	res := seckill.ReserveResult{StockLeft: left}
	switch code {
	case codeHeld:
		res.OrderID = orderID
		return res, nil
	case codeReplay:
		res.OrderID, res.Replayed = orderID, true
		return res, nil
	case codeNotOnSale:
		return res, fmt.Errorf("%w: %w: voucher %d has no stock state in Redis (never warmed, lost, or being rebuilt)",
			seckill.ErrStockMissing, seckill.ErrUnavailable, r.VoucherID)
	case codeNotStarted:
		return res, fmt.Errorf("%w: voucher %d", seckill.ErrNotStarted, r.VoucherID)
	case codeEnded:
		return res, fmt.Errorf("%w: voucher %d", seckill.ErrEnded, r.VoucherID)
	case codeSoldOut:
		return res, fmt.Errorf("%w: voucher %d has %d left, %d asked", seckill.ErrSoldOut, r.VoucherID, left, r.Quantity)
	case codeLimit:
		return res, fmt.Errorf("%w: voucher %d, user %d, %d more asked", seckill.ErrLimitExceeded, r.VoucherID, r.UserID, r.Quantity)
	case codeIDTaken:
		// Order ids must be unique across the fleet (orderid leases node
		// ids); this means they were not. A retry gets a fresh id.
		return res, fmt.Errorf("%w: order id %d already names another reservation of voucher %d",
			seckill.ErrUnavailable, orderID, r.VoucherID)
	}
	return res, fmt.Errorf("reserve.lua: unknown code %d", code)
}

// reserveReply decodes {code, orderID, stockLeft}; Lua hands back order ids as
// strings (they came from ARGV or a hash) and counts as integers.
func reserveReply(raw []any) (code, orderID, left int64, err error) {
	if len(raw) != 3 {
		return 0, 0, 0, fmt.Errorf("reserve.lua: reply of %d values", len(raw))
	}
	var v [3]int64
	for i, x := range raw {
		if v[i], err = toInt(x); err != nil {
			return 0, 0, 0, fmt.Errorf("reserve.lua: reply value %d: %w", i, err)
		}
	}
	return v[0], v[1], v[2], nil
}

func toInt(x any) (int64, error) {
	switch x := x.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T", x)
}

// Release gives a reservation's stock back, at most once per order; see
// seckill.Stock. It is false when there was nothing to release, and also when
// mode is ReleaseIfPending and a worker already confirmed the order (use
// ReleaseStatus to tell the two apart).
func (s *Store) Release(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (bool, error) {
	st, err := s.ReleaseStatus(ctx, voucherID, orderID, mode)
	return st == Released, err
}

// ReleaseStatus is Release with the full answer of release.lua. It takes two
// round trips: release.lua must name the owner's per-user set in KEYS (a
// script may touch only declared keys), so the owner is read first. That read
// cannot go stale: an order id's entry only ever moves from live to "x", and
// the script checks again.
func (s *Store) ReleaseStatus(ctx context.Context, voucherID, orderID int64, mode seckill.ReleaseMode) (ReleaseStatus, error) {
	var m string
	switch mode {
	case seckill.ReleaseAny:
		m = "any"
	case seckill.ReleaseUnsent:
		m = "unsent"
	case seckill.ReleaseIfPending:
		m = "ifpending"
	default:
		return NothingReleased, fmt.Errorf("%w: release mode %d", seckill.ErrInvalidInput, mode)
	}
	if voucherID <= 0 || orderID <= 0 {
		return NothingReleased, fmt.Errorf("%w: release needs positive voucher and order ids", seckill.ErrInvalidInput)
	}
	k := VoucherKeys(voucherID)
	entry, err := s.rdb.HGet(ctx, k.Orders, strconv.FormatInt(orderID, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return NothingReleased, nil
	}
	if err != nil {
		return NothingReleased, unavailable("release", err)
	}
	h, live, err := parseHold(voucherID, orderID, entry)
	if err != nil || !live {
		return NothingReleased, err
	}
	start := time.Now()
	n, err := s.release.Run(ctx, s.rdb, k.releaseScript(h.UserID), orderID, m, h.UserID, s.window.Milliseconds()).Int64()
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

// checkVoucher checks what Warm and Rebuild write into meta.
func checkVoucher(v seckill.Voucher) error {
	switch {
	case v.ID <= 0:
		return fmt.Errorf("%w: voucher id must be positive", seckill.ErrInvalidInput)
	case v.StockTotal < 1 || v.StockTotal > seckill.MaxStock:
		return fmt.Errorf("%w: stock total must be 1 to %d", seckill.ErrInvalidInput, seckill.MaxStock)
	case v.StockLeft < 0 || v.StockLeft > v.StockTotal:
		return fmt.Errorf("%w: stock left must be 0 to the total", seckill.ErrInvalidInput)
	case v.PerUserLimit < 1:
		return fmt.Errorf("%w: per-user limit must be positive", seckill.ErrInvalidInput)
	case v.PriceCents < 0:
		return fmt.Errorf("%w: price must not be negative", seckill.ErrInvalidInput)
	case v.BeginAt.IsZero() || !v.EndAt.After(v.BeginAt):
		return fmt.Errorf("%w: the sale window must end after it begins", seckill.ErrInvalidInput)
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
func (s *Store) Warm(ctx context.Context, v seckill.Voucher) error {
	if err := checkVoucher(v); err != nil {
		return err
	}
	start := time.Now()
	n, err := s.warm.Run(ctx, s.rdb, []string{VoucherKeys(v.ID).Meta}, s.metaArgs(v)...).Int64()
	s.metrics.since(scriptWarm, start)
	if err != nil {
		return unavailable("warm", err)
	}
	if n < 0 {
		return fmt.Errorf("%w: voucher %d is already on sale in Redis with other values", seckill.ErrConflict, v.ID)
	}
	return nil
}

// Unwarm takes a voucher off sale and forgets everything Redis knows about it
// (holds, buyers, request keys, tombstones). It is for a voucher whose creation
// failed after Warm, and for clearing a voucher before Rebuild. The meta hash
// goes first, so no reservation can succeed while the rest is deleted.
func (s *Store) Unwarm(ctx context.Context, voucherID int64) error {
	k := VoucherKeys(voucherID)
	if err := s.rdb.Unlink(ctx, k.Meta).Err(); err != nil {
		return unavailable("unwarm", err)
	}
	keys, err := s.allKeys(ctx, s.rdb, k)
	if err != nil {
		return err
	}
	if err := s.rdb.Unlink(ctx, keys...).Err(); err != nil {
		return unavailable("unwarm", err)
	}
	return nil
}

// pipeliner is what a client and a WATCH transaction have in common.
type pipeliner interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// allKeys lists every key of a voucher, including the per-user sets of every
// user that holds something (a set is deleted by Redis once its last order
// is released, and every live hold names its user).
func (s *Store) allKeys(ctx context.Context, c pipeliner, k Keys) ([]string, error) {
	var holds *redis.StringSliceCmd
	var buyers *redis.StringSliceCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		holds = p.HVals(ctx, k.Orders)
		buyers = p.HKeys(ctx, k.Buyers)
		return nil
	})
	if err != nil {
		return nil, unavailable("list keys", err)
	}
	users := map[string]bool{}
	for _, b := range buyers.Val() {
		users[b] = true
	}
	for _, e := range holds.Val() {
		if u, _, ok := strings.Cut(e, ":"); ok {
			users[u] = true
		}
	}
	keys := k.fixed()
	for u := range users {
		if id, err := strconv.ParseInt(u, 10, 64); err == nil {
			keys = append(keys, k.User(id))
		}
	}
	return keys, nil
}

// StockLeft returns the live stock of each voucher that is on sale in Redis,
// in one pipelined round trip. Vouchers that are not warmed are absent.
func (s *Store) StockLeft(ctx context.Context, voucherIDs ...int64) (map[int64]int64, error) {
	if len(voucherIDs) == 0 {
		return map[int64]int64{}, nil
	}
	cmds := make([]*redis.StringCmd, len(voucherIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			cmds[i] = p.HGet(ctx, VoucherKeys(id).Meta, "stock")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable("stock left", err)
	}
	left := make(map[int64]int64, len(voucherIDs))
	for i, c := range cmds {
		n, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, unavailable("stock left", err)
		}
		left[voucherIDs[i]] = n
	}
	return left, nil
}

// Hold finds the live hold of orderID among the given vouchers (the caller
// does not know which voucher an order id belongs to) in one pipelined round
// trip. A hold stays live after a worker persisted it, until it is released,
// so a reader that checks PostgreSQL first and Redis second never misses an
// order that is being persisted between the two reads.
func (s *Store) Hold(ctx context.Context, orderID int64, voucherIDs []int64) (seckill.Reservation, bool, error) {
	if len(voucherIDs) == 0 {
		return seckill.Reservation{}, false, nil
	}
	field := strconv.FormatInt(orderID, 10)
	cmds := make([]*redis.StringCmd, len(voucherIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			cmds[i] = p.HGet(ctx, VoucherKeys(id).Orders, field)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return seckill.Reservation{}, false, unavailable("hold", err)
	}
	for i, c := range cmds {
		entry, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return seckill.Reservation{}, false, unavailable("hold", err)
		}
		h, live, err := parseHold(voucherIDs[i], orderID, entry)
		if err != nil || live {
			return h, live, err
		}
	}
	return seckill.Reservation{}, false, nil
}

// UserHolds returns the live holds of one user among the given vouchers,
// newest first (order ids are time-ordered), in two pipelined round trips.
// Persisted holds are included (see Hold); callers that merge with
// PostgreSQL let PostgreSQL's row win for an order id found in both.
func (s *Store) UserHolds(ctx context.Context, userID int64, voucherIDs []int64) ([]seckill.Reservation, error) {
	if len(voucherIDs) == 0 {
		return nil, nil
	}
	sets := make([]*redis.StringSliceCmd, len(voucherIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range voucherIDs {
			sets[i] = p.SMembers(ctx, VoucherKeys(id).User(userID))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("user holds", err)
	}
	type ask struct {
		voucherID int64
		orderIDs  []string
		cmd       *redis.SliceCmd
	}
	var asks []*ask
	for i, c := range sets {
		if ids := c.Val(); len(ids) > 0 {
			asks = append(asks, &ask{voucherID: voucherIDs[i], orderIDs: ids})
		}
	}
	if len(asks) == 0 {
		return nil, nil
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range asks {
			a.cmd = p.HMGet(ctx, VoucherKeys(a.voucherID).Orders, a.orderIDs...)
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
			// The set and the hash are read apart; the hash is the truth.
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
// the pending set (and keep holding their stock), one ZREM per voucher, all in
// one pipelined round trip. Workers call it after their PostgreSQL commit; it
// is idempotent, and a failed Confirm only leaves work for the reconciler,
// which must find the order in PostgreSQL before it releases anything.
func (s *Store) Confirm(ctx context.Context, rs []seckill.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	byVoucher := map[int64][]any{}
	var order []int64
	for _, r := range rs {
		if _, ok := byVoucher[r.VoucherID]; !ok {
			order = append(order, r.VoucherID)
		}
		byVoucher[r.VoucherID] = append(byVoucher[r.VoucherID], r.OrderID)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, v := range order {
			p.ZRem(ctx, VoucherKeys(v).Pending, byVoucher[v]...)
		}
		return nil
	})
	if err != nil {
		return unavailable("confirm", err)
	}
	return nil
}

// Pending returns up to max holds of a voucher that no worker has confirmed
// and that were reserved before reservedBefore, oldest first. Reservation
// times are Redis server time (reserve.lua reads TIME), so compute
// reservedBefore from Redis TIME too when hosts' clocks may disagree.
func (s *Store) Pending(ctx context.Context, voucherID int64, reservedBefore time.Time, max int) ([]seckill.Reservation, error) {
	if max <= 0 {
		return nil, fmt.Errorf("%w: max must be positive", seckill.ErrInvalidInput)
	}
	k := VoucherKeys(voucherID)
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
	vals, err := s.rdb.HMGet(ctx, k.Orders, ids...).Result()
	if err != nil {
		return nil, unavailable("pending", err)
	}
	out, err := liveHolds(voucherID, ids, vals)
	if err != nil {
		return nil, err
	}
	// Redis orders equal scores by member as text ("12" before "9"); the
	// order ids say which came first within one millisecond.
	slices.SortStableFunc(out, func(a, b seckill.Reservation) int {
		return cmp.Or(a.ReservedAt.Compare(b.ReservedAt), cmp.Compare(a.OrderID, b.OrderID))
	})
	return out, nil
}

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
