package redisstock

import "strconv"

// Keys names every Redis key of one voucher. Build them with VoucherKeys and
// nowhere else, so no key is spelled twice. All carry the hash tag {v<ID>}, so
// one voucher lives in one Redis Cluster slot and a script or MULTI over its
// keys is legal in a cluster.
type Keys struct {
	Meta    string // hash: stock, total, begin_ms, end_ms, limit, price
	Buyers  string // hash: userID -> quantity held or bought
	Reqs    string // hash: "userID:requestKey" -> orderID
	Orders  string // hash: orderID -> "userID:qty:reservedAtMs:requestKey", or "x" once released
	Pending string // zset: orderID scored by reservedAtMs, until a worker confirms it
	// Released is the zset of recent releases, "orderID:userID:requestKey"
	// scored by the release's Redis time: release.lua forgets the
	// tombstone and request key of those older than the idempotency window.
	Released string
	// Heal is the lock of the healer rebuilding this voucher: a token with a
	// lease. It is not state of the sale, so Unwarm and Rebuild leave it.
	Heal   string
	prefix string
}

// VoucherKeys returns the keys of voucher id.
func VoucherKeys(id int64) Keys {
	p := "seckill:{v" + strconv.FormatInt(id, 10) + "}:"
	return Keys{
		Meta:     p + "meta",
		Buyers:   p + "buyers",
		Reqs:     p + "reqs",
		Orders:   p + "orders",
		Pending:  p + "pending",
		Released: p + "released",
		Heal:     p + "heal",
		prefix:   p,
	}
}

// SlotKey is a key in the hash slot of voucher id's (first) bucket, for
// tools and tests that ask a Redis Cluster which node serves the voucher.
func SlotKey(id int64) string { return VoucherKeys(id).Meta }

// User is the set of one user's live order ids for this voucher.
func (k Keys) User(userID int64) string {
	return k.prefix + "user:" + strconv.FormatInt(userID, 10)
}

// script is the KEYS list of reserve.lua, in its order.
func (k Keys) script(userID int64) []string {
	return []string{k.Meta, k.Buyers, k.Reqs, k.Orders, k.Pending, k.User(userID)}
}

// releaseScript is the KEYS list of release.lua: reserve.lua's and the
// recent releases.
func (k Keys) releaseScript(userID int64) []string {
	return append(k.script(userID), k.Released)
}

// fixed is every key of the voucher's sale except the per-user sets (and
// the heal lock, which is not state of the sale).
func (k Keys) fixed() []string {
	return []string{k.Meta, k.Buyers, k.Reqs, k.Orders, k.Pending, k.Released}
}
