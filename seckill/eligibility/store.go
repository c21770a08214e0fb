package eligibility

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// MaxAllowlist is the most entries (user ids and person keys together) one
// voucher's allowlist holds.
const MaxAllowlist = 1_000_000

// keys names one voucher's keys. They carry the voucher's hash tag, as the
// room's do, so a voucher's state sits on one Redis Cluster slot.
type keys struct{ persons, allow string }

func keysOf(voucherID int64) keys {
	p := "eligibility:{v" + strconv.FormatInt(voucherID, 10) + "}:"
	return keys{persons: p + "persons", allow: p + "allow"}
}

// personHash is what the store keeps of a person key: its SHA-256, so that
// what Redis holds names nobody even if a merchant's keys were guessable.
func personHash(person string) string {
	sum := sha256.Sum256([]byte(person))
	return hex.EncodeToString(sum[:])
}

func userMember(userID int64) string    { return "u:" + strconv.FormatInt(userID, 10) }
func personMember(person string) string { return "p:" + personHash(person) }

// Store is the per-person and allowlist state of every voucher, in Redis.
// It is safe for concurrent use.
type Store struct {
	rdb   redis.UniversalClient
	claim *redis.Script
	// Grace is how long after a sale's end its keys live.
	grace time.Duration
}

// NewStore returns the store on rdb; a voucher's keys expire grace after
// its end (0: seckill.DefaultStateGrace).
func NewStore(rdb redis.UniversalClient, grace time.Duration) *Store {
	if grace <= 0 {
		grace = seckill.DefaultStateGrace
	}
	return &Store{rdb: rdb, claim: redis.NewScript(lua.EntryClaim), grace: grace}
}

func (s *Store) expireAt(v seckill.Voucher) time.Time { return v.EndAt.Add(s.grace) }

func unavailable(what string, err error) error {
	return fmt.Errorf("eligibility: %s: %w: %w", what, apperr.ErrUnavailable, err)
}

// Claim gives person's place in v's line or draw to userID: nil when it is
// theirs (now or from before), seckill.ErrNotEligible when another account
// holds it.
func (s *Store) Claim(ctx context.Context, v seckill.Voucher, person string, userID int64) error {
	held, err := s.claim.Run(ctx, s.rdb, []string{keysOf(v.ID).persons}, personHash(person),
		strconv.FormatInt(userID, 10), s.expireAt(v).UnixMilli()).Text()
	if err != nil {
		return unavailable("claim a person's place", err)
	}
	if held != "" {
		return refuse("this person already holds a place in this voucher's line with another account: one place per person; use that account")
	}
	return nil
}

// Allowed reports whether userID, or person (when not empty), is on v's
// allowlist.
func (s *Store) Allowed(ctx context.Context, v seckill.Voucher, userID int64, person string) (bool, error) {
	members := []any{userMember(userID)}
	if person != "" {
		members = append(members, personMember(person))
	}
	in, err := s.rdb.SMIsMember(ctx, keysOf(v.ID).allow, members...).Result()
	if err != nil {
		return false, unavailable("read the allowlist", err)
	}
	for _, ok := range in {
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// Allowlist is an upload of one voucher's allowlist.
type Allowlist struct {
	UserIDs []int64
	Persons []string
}

// AddAllowlist adds list to v's allowlist and returns how many entries it
// holds now. A list that would pass MaxAllowlist is refused whole.
func (s *Store) AddAllowlist(ctx context.Context, v seckill.Voucher, list Allowlist) (int64, error) {
	members := make([]any, 0, len(list.UserIDs)+len(list.Persons))
	for _, u := range list.UserIDs {
		members = append(members, userMember(u))
	}
	for _, p := range list.Persons {
		members = append(members, personMember(p))
	}
	k := keysOf(v.ID).allow
	n, err := s.rdb.SCard(ctx, k).Result()
	if err != nil {
		return 0, unavailable("count the allowlist", err)
	}
	if n+int64(len(members)) > MaxAllowlist {
		return n, apperr.Invalidf("the allowlist would hold more than %d entries", MaxAllowlist)
	}
	if len(members) > 0 {
		pipe := s.rdb.TxPipeline()
		pipe.SAdd(ctx, k, members...)
		pipe.PExpireAt(ctx, k, s.expireAt(v))
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, unavailable("write the allowlist", err)
		}
	}
	if n, err = s.rdb.SCard(ctx, k).Result(); err != nil {
		return 0, unavailable("count the allowlist", err)
	}
	return n, nil
}

// ClearAllowlist empties v's allowlist (nobody may enter until a new upload).
func (s *Store) ClearAllowlist(ctx context.Context, v seckill.Voucher) error {
	if err := s.rdb.Del(ctx, keysOf(v.ID).allow).Err(); err != nil {
		return unavailable("clear the allowlist", err)
	}
	return nil
}

// Stats are a voucher's eligibility figures.
type Stats struct {
	// Allowlist is how many entries its allowlist holds; Persons how many
	// persons hold a place.
	Allowlist, Persons int64
}

// Stats reads v's figures.
func (s *Store) Stats(ctx context.Context, v seckill.Voucher) (Stats, error) {
	k := keysOf(v.ID)
	pipe := s.rdb.Pipeline()
	allow := pipe.SCard(ctx, k.allow)
	persons := pipe.HLen(ctx, k.persons)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return Stats{}, unavailable("read the figures", err)
	}
	return Stats{Allowlist: allow.Val(), Persons: persons.Val()}, nil
}
