package redisstock

// Store.Reserve, the buy's one path in Redis, top to bottom in the order it
// runs: each function is followed by the ones it calls, so the path reads
// downwards without leaving this file but for the parts other operations
// share, named where they are called.
//
//   - Reserve finds the voucher's bucket count (shardCount, shards.go) and
//     the keys of the shopper's home bucket (BucketKeys, homeBucket: keys.go);
//   - reserveIn runs reserve.lua on that bucket: a keyed attempt first waits
//     for an abandoned one (abandonedAttempts), an answer that comes after
//     its caller gave up is given back (releaseUnread; reserveReply decodes
//     every answer), the script goes with the bucket's other concurrent
//     buys in one call (batch.go), followed by one WAIT for the whole call
//     when holds must reach replicas first (replicaTarget, evalWait), and
//     an attempt given up is recorded (add);
//   - reserveOutcome turns that answer into the result, which ends the buy
//     of a voucher of one bucket;
//   - fallback, for a voucher of several buckets whose home bucket lacks
//     stock, reads every bucket (readBuckets, sums), brings stock home and
//     tries again (pullAndReserve; the moves are in shards.go), and calls it
//     sold out only when two reads agree (quiet).
//
// Giving a hold back is release.go's.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Reserve runs reserve.lua (EVALSHA, EVAL when the server lost its script
// cache). See seckill.Stock. On a refusal the result still carries the
// voucher's StockLeft, so callers can tell "none left" from "not enough left".
// A retry of the very same reservation (same order id, user, quantity and key)
// answers like the first call; a known request key answers with the first
// order and Replayed set.
func (s *Store) Reserve(ctx context.Context, r seckill.Reservation) (seckill.ReserveResult, error) {
	if err := r.Validate(); err != nil {
		return seckill.ReserveResult{}, fmt.Errorf("reserve: %w", err)
	}
	n, err := s.shardCount(ctx, r.VoucherID)
	if err != nil {
		return seckill.ReserveResult{}, err
	}
	home := BucketKeys(r.VoucherID, homeBucket(r.UserID, n))
	code, orderID, left, err := s.reserveIn(ctx, r, home)
	if err != nil {
		return seckill.ReserveResult{}, err
	}
	if n == 1 {
		return reserveOutcome(r, code, orderID, left)
	}
	return s.fallback(ctx, r, n, home, code, orderID, left)
}

// reserveIn runs reserve.lua on one bucket. A keyed reservation first waits
// for an earlier attempt with its request key whose script is still on its
// way (see abandonedAttempts).
func (s *Store) reserveIn(ctx context.Context, r seckill.Reservation, k Keys) (code, orderID, left int64, err error) {
	if err := s.abandoned.wait(ctx, r); err != nil {
		return 0, 0, 0, unavailable("reserve", err)
	}
	var handled chan struct{} // closed once a late answer was handled
	if r.RequestKey != "" {
		handled = make(chan struct{})
	}
	late := func(cmd *redis.Cmd) {
		if handled != nil {
			defer close(handled)
		}
		s.releaseUnread(r, cmd)
	}
	start := time.Now()
	raw, err := await(ctx, func(ctx context.Context) *redis.Cmd {
		keys, args := k.script(), []any{r.UserID, r.OrderID, r.Quantity, r.RequestKey}
		if s.batches != nil {
			return s.batches.reserve(ctx, k, [4]any(args))
		}
		node, want, err := s.replicaTarget(ctx, keys)
		switch {
		case err != nil:
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		case want > 0:
			return s.reserveReplicated(ctx, node, want, keys, args)
		}
		script, args := s.single(args)
		return script.Run(ctx, s.hot, keys, args...)
	}, late).Slice()
	s.metrics.since(scriptReserve, start)
	if errors.Is(err, errNotReplicated) {
		// Held on the master only: what a failover would lose must not
		// be promised. The give-back goes to the same master, behind the
		// hold, so a replica gets both or neither; one that fails leaves
		// the hold to the reconciler, as any hold without a message.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptWait)
		_, _ = s.Release(rctx, r.VoucherID, r.OrderID, seckill.ReleaseUnsent)
		cancel()
	}
	if err != nil {
		if handled != nil && errors.Is(err, errGaveUp) {
			s.abandoned.add(r, handled)
		}
		return 0, 0, 0, unavailable("reserve", err)
	}
	return reserveReply(raw)
}

// abandonedAttempts are the keyed reservations whose caller stopped waiting
// while the script was still on its way to Redis (a link gone silent), each
// with a channel closed once its late answer was handled. A retry of the
// same Idempotency-Key waits for that first: sent at once, its script could
// run just after the abandoned one and be answered as its replay, with an
// order that releaseUnread then gives back and that no message will ever
// carry (a 202 that never ends). After the wait the key is either free (the
// late hold was given back, and the retry holds anew) or still names a hold
// whose release failed, which the reconciler settles.
//
// It covers the retries that reach the same gateway, as a shopper's do while
// their connection lives. A retry sent through another gateway in the one
// round trip between the late hold and its release finds the hold undecided
// (promise.go) and waits too, in seckill.Buyer.
type abandonedAttempts struct{ m sync.Map } // requestAttempt -> chan struct{}

// requestAttempt names one shopper's attempt of one voucher by its
// Idempotency-Key.
type requestAttempt struct {
	voucherID, userID int64
	key               string
}

func (a *abandonedAttempts) wait(ctx context.Context, r seckill.Reservation) error {
	if r.RequestKey == "" {
		return nil
	}
	v, ok := a.m.Load(requestAttempt{r.VoucherID, r.UserID, r.RequestKey})
	if !ok {
		return nil
	}
	select {
	case <-v.(chan struct{}):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("an earlier attempt with this Idempotency-Key is still on its way, and its answer decides this one: %w", ctx.Err())
	}
}

// releaseUnread gives back the hold of r that reserve.lua made after its
// caller stopped waiting (late is its answer): the caller answered the buy
// unavailable and queued no message, so no worker can ever persist it. A
// release that fails leaves the hold to the reconciler, as any hold without
// a message; a known request key (a replay) holds nothing of r's.
func (s *Store) releaseUnread(r seckill.Reservation, late *redis.Cmd) {
	raw, err := late.Slice()
	if err != nil && !errors.Is(err, errNotReplicated) {
		return
	}
	if code, _, _, err := reserveReply(raw); err != nil || code != codeHeld {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scriptWait)
	defer cancel()
	_, _ = s.Release(ctx, r.VoucherID, r.OrderID, seckill.ReleaseUnsent)
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

// scriptWait bounds the wait for a script sent on a buyer's behalf that must
// not stop when the buyer's context ends: a hold nobody will answer or queue
// must be given back; a reservation of the fallback that Redis made must be
// answered to the buyer (else a retry of its key replays an order that was
// never queued); and a move once begun should complete.
const scriptWait = 5 * time.Second

// errNotReplicated is a hold that fewer replicas than Config.WaitReplicas
// acknowledged in time; the command keeps reserve.lua's reply.
var errNotReplicated = errors.New("the hold was not acknowledged by the master's replicas in time")

// replicaTarget is where a hold on keys must be copied before it counts,
// and to how many replicas: the voucher's master and Config.WaitReplicas,
// or under WaitReplicasAuto what that master has (replicas.go). want 0
// waits for none.
func (s *Store) replicaTarget(ctx context.Context, keys []string) (node redis.Cmdable, want int, err error) {
	if s.waitReplicas == 0 {
		return nil, 0, nil
	}
	node, addr := redis.Cmdable(s.rdb), ""
	if c, ok := s.rdb.(*redis.ClusterClient); ok {
		master, err := c.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, err
		}
		node, addr = master, master.Options().Addr
	}
	if s.waitReplicas > 0 {
		return node, s.waitReplicas, nil
	}
	return node, s.replicas.want(ctx, node, addr), nil
}

// reserveReplicated runs reserve.lua (one buy) on node with WAIT want, and
// fails a hold that fewer replicas acknowledged in time with
// errNotReplicated. A refusal, a replay or an error wrote nothing to wait
// for.
func (s *Store) reserveReplicated(ctx context.Context, node redis.Cmdable, want int, keys []string, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	script, argv := s.single(args)
	val, short, err := s.evalWait(ctx, node, want, script, keys, argv)
	if err != nil {
		cmd.SetErr(err)
		return cmd
	}
	cmd.SetVal(val)
	raw, _ := cmd.Slice()
	if code, _, _, err := reserveReply(raw); err == nil && code == codeHeld && short != nil {
		cmd.SetErr(short)
	}
	return cmd
}

// evalWait runs script on node in one pipeline with WAIT want, and returns
// its reply and, when fewer than want replicas acknowledged the call's
// writes within s.waitTimeout, an errNotReplicated that says so. WAIT
// counts the writes of its own connection, which is why both go in one
// pipeline to the keys' master rather than through the group commit or the
// cluster client's routing; one WAIT covers every hold of a batch.
func (s *Store) evalWait(ctx context.Context, node redis.Cmdable, want int, script *redis.Script, keys []string, argv []any) (val any, short, err error) {
	for attempt := 0; ; attempt++ {
		pipe := node.Pipeline()
		ev := pipe.EvalSha(ctx, script.Hash(), keys, argv...)
		acked := pipe.Do(ctx, "WAIT", want, s.waitTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := ev.Err(); err != nil {
			if attempt == 0 && redis.HasErrorPrefix(err, "NOSCRIPT") {
				if lerr := script.Load(ctx, node).Err(); lerr == nil {
					continue
				}
			}
			return nil, nil, err
		}
		if n, err := acked.Int(); err != nil || n < want {
			short = fmt.Errorf("%w (%d of %d within %v; wait error: %v)", errNotReplicated, n, want, s.waitTimeout, err)
		}
		return ev.Val(), short, nil
	}
}

// runBatch runs one batch of reserve_batch.lua (batch.go) on keys: in
// the group commit, or, when holds must be copied to replicas first, with
// one WAIT for the whole batch (evalWait), whose shortfall it returns.
func (s *Store) runBatch(ctx context.Context, keys []string, args []any) (*redis.Cmd, error) {
	cmd := redis.NewCmd(ctx)
	node, want, err := s.replicaTarget(ctx, keys)
	if err != nil {
		cmd.SetErr(err)
		return cmd, nil
	}
	if want == 0 {
		return s.reserveBatch.Run(ctx, s.hot, keys, args...), nil
	}
	val, short, err := s.evalWait(ctx, node, want, s.reserveBatch, keys, args)
	if err != nil {
		cmd.SetErr(err)
		return cmd, nil
	}
	cmd.SetVal(val)
	return cmd, short
}

// single is the script and ARGV of one reservation sent on its own (args
// as reserve.lua's): reserve.lua, or, when Config.UserLimit is set,
// reserve_batch.lua with one buy, which judges the limit too.
func (s *Store) single(args []any) (*redis.Script, []any) {
	if s.limit[0] == int64(0) {
		return s.reserve, args
	}
	return s.reserveBatch, append([]any{1, s.limit[0], s.limit[1]}, args...)
}

// add is wait's other half: reserveIn records an attempt whose caller gave
// up, until its late answer was handled.
func (a *abandonedAttempts) add(r seckill.Reservation, handled chan struct{}) {
	k := requestAttempt{r.VoucherID, r.UserID, r.RequestKey}
	a.m.Store(k, handled)
	go func() {
		<-handled
		a.m.CompareAndDelete(k, handled)
	}()
}

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
	codeUndecided  = 8
	codeLimited    = 9 // reserve_batch.lua's: the orderID is the wait in ms
)

// reserveOutcome is the one place that turns reserve.lua's codes into results
// and the errors of seckill and seckill/apperr.
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
			seckill.ErrStockMissing, apperr.ErrUnavailable, r.VoucherID)
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
			apperr.ErrUnavailable, orderID, r.VoucherID)
	case codeUndecided:
		return res, undecided(r.VoucherID, orderID)
	case codeLimited:
		return res, apperr.WithRetryAfter(fmt.Errorf("%w: user %d buys voucher %d faster than the limit",
			apperr.ErrRateLimited, r.UserID, r.VoucherID), time.Duration(orderID)*time.Millisecond)
	}
	return res, fmt.Errorf("reserve.lua: unknown code %d", code)
}

// fallback is the rest of Reserve for a voucher of n > 1 buckets, after the
// home bucket answered code: while the home bucket lacks stock, stock moves
// into it from the others (shards.go) and the buy is tried there again,
// until the buy is decided or ctx ends. Every script runs on one bucket.
func (s *Store) fallback(ctx context.Context, r seckill.Reservation, n int, home Keys, code, orderID, left int64) (seckill.ReserveResult, error) {
	for attempt := 0; code == codeSoldOut; attempt++ {
		if attempt > 2 {
			// Many shoppers of one bucket chase the same stock: back off a
			// little, so the moves and reads do not spin.
			t := time.NewTimer(time.Duration(min(attempt, 20)) * time.Millisecond)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			return seckill.ReserveResult{}, unavailable("reserve (moving stock between buckets)", err)
		}
		st, err := s.readBuckets(ctx, r.VoucherID, n)
		if err != nil {
			return seckill.ReserveResult{}, err
		}
		for _, b := range st {
			if !b.onSale {
				return reserveOutcome(r, codeNotOnSale, 0, 0)
			}
		}
		stock, moving := sums(st)
		switch {
		case stock >= r.Quantity:
			if code, orderID, left, err = s.pullAndReserve(ctx, r, st, home); err != nil {
				return seckill.ReserveResult{}, err
			}
			continue
		case moving > 0:
			// Stock is on its way between buckets (another buyer's move,
			// or one whose process died): finish it, then look again.
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptWait)
			_, err := s.finishMoves(wctx, r.VoucherID, n)
			cancel()
			if err != nil {
				return seckill.ReserveResult{}, err
			}
			continue
		}
		again, err := s.readBuckets(ctx, r.VoucherID, n)
		if err != nil {
			return seckill.ReserveResult{}, err
		}
		if quiet(st, again) {
			// No bucket gained stock between the two reads, so at the
			// moment the first one ended every bucket together held less
			// than asked: sold out for this request.
			left, _ = sums(again)
			return reserveOutcome(r, codeSoldOut, 0, left)
		}
	}
	if code == codeHeld && left == 0 {
		// The home bucket is empty; the gateway takes StockLeft 0 for sold
		// out, so tell it the voucher's figure.
		if all, err := s.readBuckets(ctx, r.VoucherID, n); err == nil {
			stock, moving := sums(all)
			left = stock + moving
		} else {
			left = -1 // unknown; not 0, which would say sold out
		}
	}
	return reserveOutcome(r, code, orderID, left)
}

// bucketState is what the fallback reads of one bucket's meta.
type bucketState struct {
	onSale         bool
	stock, out, in int64
	rels           int64
	epoch          string
	keys           Keys
}

// readBuckets reads every bucket's meta in one pipelined round trip (on a
// cluster, one per node, in parallel).
func (s *Store) readBuckets(ctx context.Context, id int64, n int) ([]bucketState, error) {
	cmds := make([]*redis.SliceCmd, n)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			cmds[b] = p.HMGet(ctx, BucketKeys(id, b).Meta, "stock", "out", "in", "rels", "epoch")
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("read buckets", err)
	}
	out := make([]bucketState, n)
	for b, c := range cmds {
		v := c.Val()
		st := bucketState{keys: BucketKeys(id, b)}
		st.onSale = v[0] != nil
		st.stock, st.out, st.in, st.rels = intOf(v[0]), intOf(v[1]), intOf(v[2]), intOf(v[3])
		st.epoch, _ = v[4].(string)
		out[b] = st
	}
	return out, nil
}

// intOf reads an HMGET answer as an integer (0 when absent).
func intOf(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}

// sums are the buckets' stock and the stock on its way between buckets.
func sums(st []bucketState) (stock, moving int64) {
	for _, b := range st {
		stock += b.stock
		moving += b.out - b.in
	}
	return stock, moving
}

// pullAndReserve moves stock into the home bucket when it lacks some, then
// tries the reservation there again and returns reserve.lua's answer.
func (s *Store) pullAndReserve(ctx context.Context, r seckill.Reservation, st []bucketState, home Keys) (code, orderID, left int64, err error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scriptWait)
	defer cancel()
	if have := st[home.Bucket].stock; have < r.Quantity {
		if err := s.pull(wctx, r.VoucherID, st, home.Bucket, r.Quantity-have); err != nil {
			return 0, 0, 0, err
		}
	}
	if err := ctx.Err(); err != nil {
		// Nothing reserved yet: the buyer is gone, so do not start.
		return 0, 0, 0, unavailable("reserve (moving stock between buckets)", err)
	}
	return s.reserveIn(wctx, r, home)
}

// quiet reports that nothing gave stock to any bucket between two reads:
// same releases, same moves, same epoch everywhere.
func quiet(a, b []bucketState) bool {
	for i := range a {
		if a[i].rels != b[i].rels || a[i].in != b[i].in || a[i].out != b[i].out ||
			a[i].epoch != b[i].epoch || a[i].onSale != b[i].onSale {
			return false
		}
	}
	return true
}
