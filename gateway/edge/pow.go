package edge

// The proof-of-work challenge of vouchers whose challenge is pow (GET
// /api/v1/challenges; the README's "Challenges"): a work every device can
// do, priced by load, single use.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Redis keys of the proof-of-work challenges: each live challenge under
// PoWKeyPrefix+<id> ("<voucher id>:<difficulty bits>", for its TTL), and the
// challenges asked per window, per client address and per voucher, under
// powLoadPrefix.
const (
	PoWKeyPrefix  = "seckill:pow:"
	powLoadPrefix = "seckill:powload:"
)

// Shapes of a challenge and its answer, checked before anything else.
const (
	// powIDBytes of randomness make the id (and salt) of a challenge.
	powIDBytes = 16
	// maxNonceDigits is the longest decimal nonce accepted: a uint64.
	maxNonceDigits = 20
	// gateChallenge names the challenge's step in the gates' metrics.
	gateChallenge = "challenge"
)

// PoWConfig prices the proof of work (cmd/seckill/CONFIG.md, SECKILL_POW_*).
// Difficulty = BaseBits + one bit per doubling of the challenges the client
// address asked in the last Window past AddressFree (AddressFree+1 to
// 2*AddressFree: one bit, to 4*AddressFree: two, ...) + as many for those
// asked for the voucher past VoucherFree, at most MaxBits.
type PoWConfig struct {
	BaseBits, MaxBits        int
	Window, TTL              time.Duration
	AddressFree, VoucherFree int
}

func (c *PoWConfig) defaults() {
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	defInt(&c.BaseBits, 14)
	defInt(&c.MaxBits, 18)
	defInt(&c.AddressFree, 20)
	defInt(&c.VoucherFree, 10000)
	c.MaxBits = max(c.MaxBits, c.BaseBits)
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.TTL <= 0 {
		c.TTL = 2 * time.Minute
	}
}

// Challenges issues proof-of-work challenges and spends their answers.
type Challenges struct {
	rdb redis.UniversalClient
	cfg PoWConfig
	m   *metrics
	now func() time.Time
}

// Difficulty is the rule of PoWConfig: base plus one bit per doubling of
// each count above its free share, capped.
func (c PoWConfig) Difficulty(addressCount, voucherCount int64) int {
	return min(c.MaxBits, c.BaseBits+doublings(addressCount, c.AddressFree)+doublings(voucherCount, c.VoucherFree))
}

// doublings is 0 up to free, then 1 up to 2*free, 2 up to 4*free, ...
func doublings(n int64, free int) int {
	if n <= int64(free) {
		return 0
	}
	return bits.Len64(uint64((n - 1) / int64(free)))
}

// Issue makes a challenge for voucherID asked from clientKey, at the
// difficulty the recent load of both sets.
func (c *Challenges) Issue(ctx context.Context, voucherID int64, clientKey string) (api.Challenge, error) {
	now := c.now()
	addr, vouch, err := c.load(ctx, voucherID, clientKey, now)
	if err != nil {
		return api.Challenge{}, fmt.Errorf("%w: redis challenge load: %w", apperr.ErrUnavailable, err)
	}
	difficulty := c.cfg.Difficulty(addr, vouch)
	var raw [powIDBytes]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return api.Challenge{}, fmt.Errorf("%w: challenge id: %w", apperr.ErrUnavailable, err)
	}
	id := hex.EncodeToString(raw[:])
	val := strconv.FormatInt(voucherID, 10) + ":" + strconv.Itoa(difficulty)
	if err := c.rdb.Set(ctx, PoWKeyPrefix+id, val, c.cfg.TTL).Err(); err != nil {
		return api.Challenge{}, fmt.Errorf("%w: redis challenge: %w", apperr.ErrUnavailable, err)
	}
	return api.Challenge{
		ChallengeID: id, Kind: "pow", Algorithm: "SHA-256", Salt: id,
		DifficultyBits: difficulty, ExpiresAt: now.Add(c.cfg.TTL).UTC().Truncate(time.Second),
	}, nil
}

// registerPurpose is the voucher id a registration's challenges are issued
// and counted under: no voucher has it (ids start at 1), so a voucher's
// answer never registers an account, nor the other way round, and the
// sign-ups' recent load prices their own difficulty.
const registerPurpose = 0

// IssueRegister makes a challenge for registering an account
// (SECKILL_REGISTER_CHALLENGE=pow), priced like a voucher's, by the
// address's recent asks and by every address's sign-ups.
func (c *Challenges) IssueRegister(ctx context.Context, clientKey string) (api.Challenge, error) {
	return c.Issue(ctx, registerPurpose, clientKey)
}

// SpendRegister judges a registration's answer and spends its challenge,
// right or wrong; a voucher's challenge is no registration's.
func (c *Challenges) SpendRegister(ctx context.Context, id, answer string) error {
	return c.counted(c.spend(ctx, registerPurpose, id, answer))
}

// load counts this challenge and returns the sliding-window counts of the
// address and of the voucher: this window's count plus the last window's,
// weighted by how much of it still lies within one Window of now. One
// round trip.
func (c *Challenges) load(ctx context.Context, voucherID int64, clientKey string, now time.Time) (addr, vouch int64, err error) {
	w := c.cfg.Window
	cur := now.UnixNano() / int64(w)
	frac := float64(now.UnixNano()%int64(w)) / float64(w)
	keys := [2]string{powLoadPrefix + "a:" + clientKey + ":", powLoadPrefix + "v:" + strconv.FormatInt(voucherID, 10) + ":"}
	var incr [2]*redis.IntCmd
	var prev [2]*redis.StringCmd
	_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			curKey := k + strconv.FormatInt(cur, 10)
			incr[i] = p.Incr(ctx, curKey)
			p.Expire(ctx, curKey, 2*w)
			prev[i] = p.Get(ctx, k+strconv.FormatInt(cur-1, 10))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	var counts [2]int64
	for i := range keys {
		before, _ := prev[i].Int64() // a missing last window counts 0
		counts[i] = incr[i].Val() + int64(float64(before)*(1-frac))
	}
	return counts[0], counts[1], nil
}

// Precheck implements buy.Challenge: the shape of the id and the nonce, and
// one hash at the base difficulty, with no I/O. A farm cannot reach the
// shared limits without doing at least the base work per attempt.
func (c *Challenges) Precheck(a *buy.Attempt) error {
	if !validPoWID(a.ChallengeID) || !validNonce(a.ChallengeAnswer) ||
		leadingZeroBits(a.ChallengeID, a.ChallengeAnswer) < c.cfg.BaseBits {
		c.m.reject(gateChallenge, "invalid")
		return errChallenge
	}
	return nil
}

// Check implements buy.Challenge: the challenge is spent (GETDEL, right or
// wrong), then judged against the voucher and difficulty it was issued
// for. known skips it as for the captcha (the first attempt spent it).
func (c *Challenges) Check(ctx context.Context, a *buy.Attempt, known bool) error {
	if known {
		c.m.allow(gateChallenge)
		return nil
	}
	return c.counted(c.spend(ctx, a.Request.VoucherID, a.ChallengeID, a.ChallengeAnswer))
}

// counted records the judgement of a spent challenge on the gate's
// counters (allowed, invalid, or error when Redis did not answer) and
// returns it.
func (c *Challenges) counted(err error) error {
	switch {
	case errors.Is(err, apperr.ErrUnavailable):
		c.m.reject(gateChallenge, "error")
	case err != nil:
		c.m.reject(gateChallenge, "invalid")
	default:
		c.m.allow(gateChallenge)
	}
	return err
}

// errChallenge is every verdict against an answer.
var errChallenge = fmt.Errorf("%w: missing, wrong, expired or already used", apperr.ErrChallengeInvalid)

// spend judges id and nonce for voucherID, and burns the challenge.
func (c *Challenges) spend(ctx context.Context, voucherID int64, id, nonce string) error {
	if !validPoWID(id) {
		return errChallenge
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	val, err := c.rdb.GetDel(ctx, PoWKeyPrefix+id).Result()
	if errors.Is(err, redis.Nil) {
		return errChallenge
	}
	if err != nil {
		return fmt.Errorf("%w: redis challenge: %w", apperr.ErrUnavailable, err)
	}
	v, d, ok := cutInts(val)
	if !ok || v != voucherID || !validNonce(nonce) || leadingZeroBits(id, nonce) < d {
		return errChallenge
	}
	return nil
}

// cutInts reads "<voucher id>:<bits>".
func cutInts(s string) (voucherID int64, difficulty int, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			v, err1 := strconv.ParseInt(s[:i], 10, 64)
			d, err2 := strconv.Atoi(s[i+1:])
			return v, d, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

// leadingZeroBits counts the zero bits SHA-256(salt + nonce) begins with.
func leadingZeroBits(salt, nonce string) int {
	var buf [2*powIDBytes + maxNonceDigits]byte
	sum := sha256.Sum256(append(append(buf[:0], salt...), nonce...))
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// validPoWID accepts the ids Issue makes: lower-case hex of powIDBytes.
func validPoWID(id string) bool {
	if len(id) != 2*powIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// validNonce accepts 1 to maxNonceDigits decimal digits.
func validNonce(s string) bool {
	if s == "" || len(s) > maxNonceDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Solve finds the smallest decimal nonce for salt at difficulty bits: what a
// client does, here for tests and the benchmark of a farm's cost.
func Solve(salt string, difficulty int) string {
	for n := uint64(0); ; n++ {
		s := strconv.FormatUint(n, 10)
		if leadingZeroBits(salt, s) >= difficulty {
			return s
		}
	}
}
