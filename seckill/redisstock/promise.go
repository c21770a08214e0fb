package redisstock

// A keyed hold's fate, as the replays of its Idempotency-Key see it: undecided
// from the moment reserve.lua writes it until its gateway promises it or
// gives it back (seckill/RULES.md, "A 202 stands").

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Promise records that r's order stands: its gateway has its message
// written (or found the order persisted), so a replay of r's request key, on
// any gateway, may answer with it. Until then reserve.lua answers such a
// replay undecided (seckill.ErrUndecided): the gateway may still fence the
// order or give its hold back, and a 202 given meanwhile would be let down.
//
// It deletes the hold's undecided field, in one HDEL of the hold's bucket
// shared with the promises that meet it in this process (promisebatch.go);
// unkeyed holds have none (nothing can replay them) and cost nothing. It
// never unmakes a decision: the field is written only with the hold, and a
// released hold has none. A Promise that fails leaves the replays waiting
// until a worker persists the order, which decides it too (it leaves
// pending): slower replays, never a wrong one.
func (s *Store) Promise(ctx context.Context, r seckill.Reservation) error {
	if r.RequestKey == "" {
		return nil
	}
	n, err := s.shardCount(ctx, r.VoucherID)
	if err != nil {
		return err
	}
	k := BucketKeys(r.VoucherID, homeBucket(r.UserID, n))
	if err := s.promises.promise(ctx, k.Ledger, undecidedField(r.OrderID)); err != nil {
		return unavailable("promise", err)
	}
	return nil
}

// undecided is the refusal of a replay whose order's fate is not decided
// yet (reserve.lua's answer 8, or a read of the request's order).
func undecided(voucherID, orderID int64) error {
	return fmt.Errorf("%w: %w: voucher %d: order %d of this Idempotency-Key is still being settled by the gateway that made it",
		seckill.ErrUndecided, apperr.ErrUnavailable, voucherID, orderID)
}

// undecidedOrders reports which of the given orders of bucket k still carry
// their undecided field, pipelined in chunks of rebuildChunk fields. Read
// after the orders' request keys were, an absent field is a safe "decided":
// reserve.lua writes a key's hold and its field in one step, so the field of
// a hold seen by its key is gone only once a decision removed it (or the
// hold was written decided, by a rebuild from PostgreSQL's persisted orders).
func (s *Store) undecidedOrders(ctx context.Context, k Keys, orderIDs []int64) (map[int64]bool, error) {
	if len(orderIDs) == 0 {
		return nil, nil
	}
	var cmds []*redis.SliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < len(orderIDs); i += rebuildChunk {
			chunk := orderIDs[i:min(i+rebuildChunk, len(orderIDs))]
			fields := make([]string, len(chunk))
			for j, id := range chunk {
				fields[j] = undecidedField(id)
			}
			cmds = append(cmds, p.HMGet(ctx, k.Ledger, fields...))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("undecided orders", err)
	}
	out := map[int64]bool{}
	for c, cmd := range cmds {
		for j, v := range cmd.Val() {
			if v != nil {
				out[orderIDs[c*rebuildChunk+j]] = true
			}
		}
	}
	return out, nil
}
