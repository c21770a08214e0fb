package redisstock

// The package's Redis key layout, the one place it is spelled. What Reserve
// needs comes first (a bucket's keys, the shopper's bucket, reserve.lua's
// KEYS), so its path takes one look here.

import (
	"strconv"
	"strings"
)

// Keys names every Redis key of one bucket of a voucher. Build them with
// VoucherKeys or BucketKeys and nowhere else, so no key is spelled twice.
// Bucket 0 carries the hash tag {v<ID>}, bucket b > 0 the tag {v<ID>.b}: each
// bucket lives in one Redis Cluster slot, so a script or MULTI over one
// bucket's keys is legal in a cluster, and the buckets of a voucher with
// many shards spread over the cluster's masters (see deploy/OPERATING.md, "One hot
// voucher over many Redis nodes").
type Keys struct {
	Meta string // hash: stock, total, begin_ms, end_ms, limit, price, held, holds, expire_ms (and out, in, rels, epoch when shards > 1)
	// Ledger is the hash of the sale's orders, requests and buyers, one
	// field each (lua/reserve.lua spells them): orderID ->
	// "userID:qty:reservedAtMs:requestKey" ("x" once released),
	// "r<userID>:<requestKey>" -> orderID, "u<userID>" -> "qty orderID...",
	// the quantity the user holds or bought and their live order ids,
	// "s<orderID>" -> "1" while a keyed hold's fate is undecided (see
	// Promise), and the sentinel "_" that keeps the hash and its expiry.
	Ledger string
	// Pending is the zset of orderIDs scored by reservedAtMs, until a
	// worker confirms them, and the sentinel member 0 scored +inf.
	Pending string
	// Released is the zset of recent releases, "orderID:userID:requestKey"
	// scored by the release's Redis time: release.lua forgets the
	// tombstone and request key of those older than the idempotency window.
	Released string
	// Moves is the hash of this bucket's outgoing stock moves not yet known
	// to be credited: transferID -> "toBucket:quantity:epoch". Only a
	// voucher with more than one shard has it.
	Moves string
	// Credited is the set of move ids this bucket was credited with, so a
	// move is credited at most once.
	Credited string
	// Heal is the lock of the healer rebuilding this voucher: a token with a
	// lease. It is not state of the sale, so Unwarm and Rebuild leave it.
	// It is bucket 0's (every bucket's Heal names the same key).
	Heal string
	// HealFence is the last fencing number a heal lease was given (bucket
	// 0's slot, next to Heal); see lua/heal_lock.lua.
	HealFence string
	// Fence is the highest fencing number of a healer that rebuilt this
	// bucket, in the bucket's own slot: a fenced rebuild with a lower one
	// is refused here (see Rebuild). Like Heal it outlives Unwarm and
	// Rebuild.
	Fence string
	// Shards holds the voucher's bucket count, in bucket 0's slot. It is
	// outside the seckill:{v<ID>}: names on purpose: TakeOffSale leaves it,
	// so release, repair and the reconciler still find every bucket.
	Shards string
	// Bucket is the bucket these keys are of.
	Bucket int
}

// BucketKeys returns the keys of bucket b of voucher id. They are cut from
// one string, one allocation instead of one per key: a buy names its
// bucket's keys twice (Reserve, Promise) and the workers once per order
// (Confirm).
func BucketKeys(id int64, b int) Keys {
	// p is the prefix of the bucket's own keys, "seckill:{v42.3}:", and tag
	// the voucher's, "v42".
	var pb [64]byte
	p := append(pb[:0], "seckill:{v"...)
	p = strconv.AppendInt(p, id, 10)
	tag := p[len("seckill:{"):]
	if b > 0 {
		p = append(p, '.')
		p = strconv.AppendInt(p, int64(b), 10)
	}
	p = append(p, "}:"...)

	var sb strings.Builder
	sb.Grow(len(bucketKeyNames)*len(p) + bucketKeyNamesLen + 3*len(tag) + len("seckill:{}:heal"+"seckill:{}:healfence"+"seckill:shards:{}"))
	var ends [len(bucketKeyNames) + 3]int
	for i, name := range bucketKeyNames {
		sb.Write(p)
		sb.WriteString(name)
		ends[i] = sb.Len()
	}
	for i, parts := range [3][2]string{{"seckill:{", "}:heal"}, {"seckill:{", "}:healfence"}, {"seckill:shards:{", "}"}} {
		sb.WriteString(parts[0])
		sb.Write(tag)
		sb.WriteString(parts[1])
		ends[len(bucketKeyNames)+i] = sb.Len()
	}
	all := sb.String()
	key := func(i int) string {
		if i == 0 {
			return all[:ends[0]]
		}
		return all[ends[i-1]:ends[i]]
	}
	return Keys{
		Meta: key(0), Ledger: key(1), Pending: key(2), Released: key(3), Moves: key(4), Credited: key(5), Fence: key(6),
		Heal: key(7), HealFence: key(8), Shards: key(9),
		Bucket: b,
	}
}

// bucketKeyNames are the names of a bucket's own keys after its prefix, in
// the order BucketKeys cuts them; bucketKeyNamesLen is their length.
var bucketKeyNames = [...]string{"meta", "ledger", "pending", "released", "moves", "credited", "fence"}

const bucketKeyNamesLen = len("meta" + "ledger" + "pending" + "released" + "moves" + "credited" + "fence")

// homeBucket is the bucket of a voucher of n buckets that a user buys in:
// their count, orders and request keys live in its keys alone (shards.go,
// routing).
func homeBucket(userID int64, n int) int { return int(userID % int64(n)) }

// script is the KEYS list of reserve.lua and warm.lua, in their order.
func (k Keys) script() []string {
	return []string{k.Meta, k.Ledger, k.Pending}
}

// VoucherKeys returns the keys of voucher id's first bucket (bucket 0: the
// only one of a voucher with one shard).
func VoucherKeys(id int64) Keys { return BucketKeys(id, 0) }

// releaseScript is the KEYS list of release.lua: reserve.lua's and the
// recent releases.
func (k Keys) releaseScript() []string {
	return append(k.script(), k.Released)
}

// fixed is every key of the bucket's sale (but the heal lock, the fences
// and the shard count, which outlive a rebuild).
func (k Keys) fixed() []string {
	return []string{k.Meta, k.Ledger, k.Pending, k.Released, k.Moves, k.Credited}
}

// pendingSentinel is the member of Pending that keeps the zset, and its
// expiry, when no hold is pending (see lua/reserve.lua).
const pendingSentinel = "0"

// orderField is the Ledger field of an order.
func orderField(orderID int64) string { return strconv.FormatInt(orderID, 10) }

// userField is the Ledger field of a user: their count and live orders.
func userField(userID int64) string { return "u" + strconv.FormatInt(userID, 10) }

// undecidedField is the Ledger field that marks a keyed hold whose fate is
// not decided yet (lua/reserve.lua writes it with the hold; see Promise).
func undecidedField(orderID int64) string { return "s" + strconv.FormatInt(orderID, 10) }

// OnSaleKey is the key that exists exactly while voucher id's stock is in
// Redis (its first bucket's meta): a waiting room in the same slot checks it
// to know its own state was not lost (seckill/waitroom, Config.Recovery).
func OnSaleKey(id int64) string { return VoucherKeys(id).Meta }

// SlotKey is a key in the hash slot of voucher id's (first) bucket, for
// tools and tests that ask a Redis Cluster which node serves the voucher.
func SlotKey(id int64) string { return VoucherKeys(id).Meta }
