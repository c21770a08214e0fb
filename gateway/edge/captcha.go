package edge

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/mojocn/base64Captcha"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill/apperr"
)

// CaptchaKeyPrefix prefixes the Redis key of each live captcha's answer.
const CaptchaKeyPrefix = "seckill:captcha:"

// Bounds on what a shopper may send, checked before Redis is asked.
const (
	maxCaptchaID     = 64
	maxCaptchaAnswer = 32
	// storeTimeout bounds the library's context-free Store calls.
	storeTimeout = time.Second
)

// RedisStore is a base64Captcha.Store in Redis, so that every instance can
// check a captcha any instance issued. Each answer lives under
// seckill:captcha:<id> for a short TTL and is read with GETDEL, so it can be
// judged once only, right or wrong.
type RedisStore struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

var _ base64Captcha.Store = (*RedisStore)(nil)

// NewRedisStore returns a store whose answers expire after ttl.
func NewRedisStore(rdb redis.UniversalClient, ttl time.Duration) *RedisStore {
	return &RedisStore{rdb: rdb, ttl: ttl}
}

// Set implements base64Captcha.Store; the answer is kept normalized.
func (s *RedisStore) Set(id, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	return s.rdb.Set(ctx, CaptchaKeyPrefix+id, normalizeAnswer(value), s.ttl).Err()
}

// Get implements base64Captcha.Store ("" for unknown, expired or on error).
func (s *RedisStore) Get(id string, clear bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if !validCaptchaID(id) {
		return ""
	}
	var cmd *redis.StringCmd
	if clear {
		cmd = s.rdb.GetDel(ctx, CaptchaKeyPrefix+id)
	} else {
		cmd = s.rdb.Get(ctx, CaptchaKeyPrefix+id)
	}
	return cmd.Val()
}

// Verify implements base64Captcha.Store without the library's hole
// (mojocn/base64Captcha#94: an unknown id and an empty answer match).
func (s *RedisStore) Verify(id, answer string, clear bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ok, err := s.check(ctx, id, answer, clear)
	return err == nil && ok
}

// check judges an answer; err is only for Redis failures.
func (s *RedisStore) check(ctx context.Context, id, answer string, clear bool) (bool, error) {
	if !validCaptchaID(id) {
		return false, nil
	}
	var cmd *redis.StringCmd
	if clear {
		cmd = s.rdb.GetDel(ctx, CaptchaKeyPrefix+id)
	} else {
		cmd = s.rdb.Get(ctx, CaptchaKeyPrefix+id)
	}
	want, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// Judged after the read, so that an empty or oversized answer burns
	// the captcha like a wrong one.
	got := normalizeAnswer(answer)
	if want == "" || got == "" || len(got) > maxCaptchaAnswer {
		return false, nil
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1, nil
}

// normalizeAnswer forgives case and every kind of white space.
func normalizeAnswer(s string) string {
	return strings.ToLower(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s))
}

// validCaptchaID accepts the ids the library makes (letters and digits).
func validCaptchaID(id string) bool {
	if id == "" || len(id) > maxCaptchaID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// Captchas issues image and audio captchas and checks their answers.
type Captchas struct {
	store   *RedisStore
	captcha *base64Captcha.Captcha
	audio   *base64Captcha.Captcha
}

// NewCaptchas returns captchas of five digits kept in Redis for ttl, shown
// or spoken (in English) alike, in the same store.
func NewCaptchas(rdb redis.UniversalClient, ttl time.Duration) *Captchas {
	store := NewRedisStore(rdb, ttl)
	driver := base64Captcha.NewDriverDigit(80, 240, 5, 0.7, 80)
	return &Captchas{
		store: store, captcha: base64Captcha.NewCaptcha(driver, store),
		audio: base64Captcha.NewCaptcha(base64Captcha.NewDriverAudio(5, "en"), store),
	}
}

// NewAudio issues a captcha read aloud: its id and its sound as a
// data:audio/wav;base64 URL. Check judges it like an image's.
func (c *Captchas) NewAudio(ctx context.Context) (id, audio string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	id, audio, _, err = c.audio.Generate()
	if err != nil {
		return "", "", fmt.Errorf("%w: audio captcha: %w", apperr.ErrUnavailable, err)
	}
	return id, audio, nil
}

// New issues a captcha: its id and its image as a data:image/png;base64 URL.
func (c *Captchas) New(ctx context.Context) (id, image string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	id, image, _, err = c.captcha.Generate()
	if err != nil {
		return "", "", fmt.Errorf("%w: captcha: %w", apperr.ErrUnavailable, err)
	}
	return id, image, nil
}

// Check judges an answer and burns the captcha whatever the verdict. A wrong,
// expired, reused, empty or malformed one is apperr.ErrCaptchaInvalid.
func (c *Captchas) Check(ctx context.Context, id, answer string) error {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	ok, err := c.store.check(ctx, id, answer, true)
	if err != nil {
		return fmt.Errorf("%w: redis captcha: %w", apperr.ErrUnavailable, err)
	}
	if !ok {
		return fmt.Errorf("%w: missing, wrong, expired or already used", apperr.ErrCaptchaInvalid)
	}
	return nil
}

// captchaGate demands the captcha of vouchers that require one (the buy's
// step 6; the pipeline asks only for those, after its fast refusal).
type captchaGate struct{ e *Edge }

// Check implements buy.Captcha.
func (g captchaGate) Check(ctx context.Context, a *buy.Attempt, known bool) error {
	if known {
		// A retry of a request the voucher already accepted: its captcha
		// was burned by the first attempt, and reserve.lua (or the sold-out
		// flag) replays the first order without selling anything, as the contract
		// promises for a repeated Idempotency-Key.
		g.e.metrics.allow(gateCaptcha)
		return nil
	}
	if err := g.e.Captchas.Check(ctx, a.CaptchaID, a.CaptchaAnswer); err != nil {
		reason := "invalid"
		if errors.Is(err, apperr.ErrUnavailable) {
			reason = "error"
		}
		g.e.metrics.reject(gateCaptcha, reason)
		return err
	}
	g.e.metrics.allow(gateCaptcha)
	return nil
}
