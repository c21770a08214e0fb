package redisstock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Request names an accepted Idempotency-Key of one voucher: the user who
// sent it and the key. Keys are per user, so two users' equal keys are two
// requests.
type Request struct {
	UserID int64
	Key    string
}

// reqField is reserve.lua's field of a request in the ledger.
func (r Request) reqField() string {
	return "r" + strconv.FormatInt(r.UserID, 10) + ":" + r.Key
}

// RequestKnown reports whether the voucher's sale already accepted this
// request (its key made an order, live or released within the idempotency
// window, decided or not): a retry of it is a replay, which reserve.lua
// answers without selling anything.
func (s *Store) RequestKnown(ctx context.Context, voucherID int64, r Request) (bool, error) {
	_, _, known, err := s.requestOrder(ctx, voucherID, r)
	return known, err
}

// RequestOrder is the order the voucher's sale accepted for this request,
// found false for a request it does not know (see RequestKnown). It reads,
// never sells: a replay answered from it cannot buy anything. An order whose
// fate is not decided yet (see Promise) is refused with seckill.ErrUndecided:
// answered now, it could be fenced or given back after the answer.
func (s *Store) RequestOrder(ctx context.Context, voucherID int64, r Request) (orderID int64, found bool, err error) {
	id, k, found, err := s.requestOrder(ctx, voucherID, r)
	if err != nil || !found {
		return 0, false, err
	}
	und, err := s.undecidedOrders(ctx, k, []int64{id})
	if err != nil {
		return 0, false, err
	}
	if und[id] {
		return 0, false, undecided(voucherID, id)
	}
	return id, true, nil
}

// requestOrder is the order the request's key names in its home bucket k,
// decided or not.
func (s *Store) requestOrder(ctx context.Context, voucherID int64, r Request) (orderID int64, k Keys, found bool, err error) {
	if r.Key == "" {
		return 0, k, false, nil
	}
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return 0, k, false, err
	}
	k = BucketKeys(voucherID, homeBucket(r.UserID, n))
	v, err := s.rdb.HGet(ctx, k.Ledger, r.reqField()).Result()
	if errors.Is(err, redis.Nil) {
		return 0, k, false, nil
	}
	if err != nil {
		return 0, k, false, unavailable("request order", err)
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, k, false, fmt.Errorf("redisstock: corrupt request key %q -> %q of voucher %d", r.reqField(), v, voucherID)
	}
	return id, k, true, nil
}

// UndecidedOrder is the order RequestKeys gives a request whose order's fate
// was not decided when it was read (see Promise): the request is known, but
// only reserve.lua may answer its replay. Order ids are positive.
const UndecidedOrder int64 = 0

// RequestKeys returns every accepted request of a voucher (of every bucket)
// with its first order, for a gateway that answers replays of a sold-out
// voucher from memory. complete is false (and the map nil) when the voucher
// has more than max of them: the caller then leaves replays to reserve.lua.
// The request keys share the ledger with the orders and buyers, so it is
// walked with HSCAN, a slice at a time (Redis is never blocked for long),
// and the walk stops as soon as more than max are found. A request whose
// order was undecided when read after the walk maps to UndecidedOrder: a
// copy may answer only what was decided, since a decision is never undone.
func (s *Store) RequestKeys(ctx context.Context, voucherID int64, max int) (_ map[Request]int64, complete bool, err error) {
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return nil, false, err
	}
	out := map[Request]int64{}
	for b := range n {
		k := BucketKeys(voucherID, b)
		var seen []Request
		it := s.rdb.HScan(ctx, k.Ledger, 0, "r*", requestScan).Iterator()
		for it.Next(ctx) {
			field := it.Val()
			if !it.Next(ctx) {
				break
			}
			v := it.Val()
			user, key, ok := strings.Cut(strings.TrimPrefix(field, "r"), ":")
			uid, uerr := strconv.ParseInt(user, 10, 64)
			id, ierr := strconv.ParseInt(v, 10, 64)
			if !ok || uerr != nil || ierr != nil {
				return nil, false, fmt.Errorf("redisstock: corrupt request key %q -> %q of voucher %d", field, v, voucherID)
			}
			req := Request{UserID: uid, Key: key}
			out[req] = id
			seen = append(seen, req)
			if len(out) > max {
				return nil, false, nil
			}
		}
		if err := it.Err(); err != nil {
			return nil, false, unavailable("request keys", err)
		}
		if err := s.markUndecided(ctx, k, seen, out); err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// markUndecided sets the order of each of the requests of bucket k whose
// order is still undecided to UndecidedOrder in out.
func (s *Store) markUndecided(ctx context.Context, k Keys, reqs []Request, out map[Request]int64) error {
	ids := make([]int64, len(reqs))
	for i, r := range reqs {
		ids[i] = out[r]
	}
	und, err := s.undecidedOrders(ctx, k, ids)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if und[out[r]] {
			out[r] = UndecidedOrder
		}
	}
	return nil
}

// requestScan is the COUNT of one HSCAN step of RequestKeys.
const requestScan = 10_000

// TakeOffSale deletes the voucher's meta, in every bucket: reserve.lua
// answers "not on sale" from then on, while the holds stay for a repair to
// read and release.lua still gives stock back. The bucket count stays, so
// release, repair and the reconciler still find every bucket.
func (s *Store) TakeOffSale(ctx context.Context, voucherID int64) error {
	n, err := s.shardCount(ctx, voucherID)
	if err != nil {
		return err
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range n {
			p.Del(ctx, BucketKeys(voucherID, b).Meta)
		}
		return nil
	})
	if err != nil {
		return unavailable("take off sale", err)
	}
	return nil
}

// announceStock publishes voucherID on StockChannel after a release, best
// effort: a lost announcement costs the gateways one re-check interval.
func (s *Store) announceStock(ctx context.Context, voucherID int64) {
	if s.quiet {
		return
	}
	_ = s.rdb.Publish(ctx, StockChannel, strconv.FormatInt(voucherID, 10)).Err()
}
