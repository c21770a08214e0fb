package redisstock

// The reservation batcher: the buys of one bucket that meet in this process
// go to Redis together, in one call of reserve_batch.lua, and each gets its
// own answer, exactly reserve.lua's.
//
// A buy never waits to fill a batch. When no call of its bucket is in
// flight it leaves at once, alone; the buys that arrive while a call is in
// flight queue, and leave together, up to the batch's bound, the moment it
// returns. So a lone buy pays what it paid before, and a crowd pays one
// script, one read of the ledger, one of meta, one TIME and three writes per
// batch instead of per buy (lua/reserve_batch.lua). The wait a queued buy
// adds is the call in flight: the round trip it would have queued behind in
// the group commit anyway. The queueing is seckill/gather's; this file
// makes the call and splits its reply.

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/gather"
)

// DefaultReserveBatch is Config.ReserveBatch's default: past a few dozen a
// batch saves little more per buy (the fixed part is already shared), and a
// call of a few hundred buys would hold Redis, and every other client of
// the master, for a noticeable while.
const DefaultReserveBatch = 64

// batchers are the reservation queues of the buckets this process reserved
// in, by their meta key. A bucket's queue lives as long as the Store: one per
// bucket of the vouchers the process sold, a few hundred bytes each.
type batchers struct {
	m   sync.Map // string -> *gather.Queue[*batchedBuy]
	max int
	// limit is the rate limit's ARGV of every call (UserLimit.args).
	limit [2]any
	// run sends one call; short, when set, says the call's writes did not
	// reach the replicas they had to (Store.runBatch).
	run func(ctx context.Context, keys []string, args []any) (cmd *redis.Cmd, short error)
}

// batchedBuy is one buy waiting for its batch's answer.
type batchedBuy struct {
	args [4]any
	cmd  *redis.Cmd
}

// reserve runs reserve.lua's decision of one buy (args as reserve.lua's
// ARGV) in the next call of k's bucket, and returns its command, which
// carries reserve.lua's reply or the call's error. One call is in flight
// per bucket, so the buys are decided in the order they queued.
func (b *batchers) reserve(ctx context.Context, k Keys, args [4]any) *redis.Cmd {
	v, ok := b.m.Load(k.Meta)
	if !ok {
		keys := k.script()
		v, _ = b.m.LoadOrStore(k.Meta, gather.New(b.max, func(ctx context.Context, batch []*batchedBuy) error {
			b.call(ctx, keys, batch)
			return nil
		}))
	}
	buy := &batchedBuy{args: args, cmd: redis.NewCmd(ctx)}
	// The buy waits for its reply whatever its context: a buyer that gives
	// up is answered by its caller (await), which hands the reply to the
	// late give-back, so no hold made here goes unread. Do then fails only
	// with call's error, and call has none: each buy's is in its cmd.
	_ = v.(*gather.Queue[*batchedBuy]).Do(context.WithoutCancel(ctx), buy)
	return buy.cmd
}

// call runs one batch of the bucket of keys and hands each buy its part of
// the reply. ctx is the first buy's without its cancellation (gather.New):
// a buyer that gives up is answered by its caller (see await), and the
// others must still get theirs.
func (b *batchers) call(ctx context.Context, keys []string, batch []*batchedBuy) {
	args := make([]any, 3, 3+4*len(batch))
	args[0], args[1], args[2] = len(batch), b.limit[0], b.limit[1]
	for _, buy := range batch {
		args = append(args, buy.args[:]...)
	}
	cmd, short := b.run(ctx, keys, args)
	raw, err := cmd.Slice()
	if err == nil && len(raw) != 3*len(batch) {
		err = fmt.Errorf("reserve_batch.lua: reply of %d values for %d buys", len(raw), len(batch))
	}
	for i, buy := range batch {
		if err != nil {
			buy.cmd.SetErr(err)
		} else {
			reply := raw[3*i : 3*i+3 : 3*i+3]
			buy.cmd.SetVal(reply)
			if code, _, _, rerr := reserveReply(reply); short != nil && rerr == nil && code == codeHeld {
				// The batch's WAIT fell short: each hold it made is
				// answered as a single buy's would be (reserveIn gives
				// it back); its refusals and replays wrote nothing.
				buy.cmd.SetErr(short)
			}
		}
	}
}
