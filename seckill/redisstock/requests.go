package redisstock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Request names an accepted Idempotency-Key of one voucher: the user who
// sent it and the key. Keys are per user, so two users' equal keys are two
// requests.
type Request struct {
	UserID int64
	Key    string
}

// reqField is reserve.lua's field of a request in the reqs hash.
func (r Request) reqField() string {
	return strconv.FormatInt(r.UserID, 10) + ":" + r.Key
}

// RequestKnown reports whether the voucher's sale already accepted this
// request (its key made an order, live or released within the idempotency
// window): a retry of it is a replay, which reserve.lua answers without
// selling anything.
func (s *Store) RequestKnown(ctx context.Context, voucherID int64, r Request) (bool, error) {
	if r.Key == "" {
		return false, nil
	}
	known, err := s.rdb.HExists(ctx, VoucherKeys(voucherID).Reqs, r.reqField()).Result()
	if err != nil {
		return false, unavailable("request known", err)
	}
	return known, nil
}

// RequestKeys returns every accepted request of a voucher with its first
// order, for a gateway that answers replays of a sold-out voucher from
// memory. complete is false (and the map nil) when the voucher has more than
// max of them: the caller then leaves replays to reserve.lua.
func (s *Store) RequestKeys(ctx context.Context, voucherID int64, max int) (_ map[Request]int64, complete bool, err error) {
	key := VoucherKeys(voucherID).Reqs
	n, err := s.rdb.HLen(ctx, key).Result()
	if err != nil {
		return nil, false, unavailable("request keys", err)
	}
	if n > int64(max) {
		return nil, false, nil
	}
	all, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, false, unavailable("request keys", err)
	}
	out := make(map[Request]int64, len(all))
	for field, v := range all {
		user, k, ok := strings.Cut(field, ":")
		uid, uerr := strconv.ParseInt(user, 10, 64)
		id, ierr := strconv.ParseInt(v, 10, 64)
		if !ok || uerr != nil || ierr != nil {
			return nil, false, fmt.Errorf("redisstock: corrupt request key %q -> %q of voucher %d", field, v, voucherID)
		}
		out[Request{UserID: uid, Key: k}] = id
	}
	return out, true, nil
}

// TakeOffSale deletes the voucher's meta: reserve.lua answers "not on
// sale" from then on, while the holds stay for a repair to read and
// release.lua still gives stock back.
func (s *Store) TakeOffSale(ctx context.Context, voucherID int64) error {
	if err := s.rdb.Del(ctx, VoucherKeys(voucherID).Meta).Err(); err != nil {
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
