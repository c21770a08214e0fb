package edge_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/edge"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/redisstock"
)

func newCaptcha(t *testing.T, c *edge.Captchas) (id, answer string) {
	t.Helper()
	id, image, err := c.New(context.Background())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(image, "data:image/png;base64,"), image[:min(len(image), 40)])
	answer, err = stack.Redis(t).Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err)
	return id, answer
}

func TestCaptchaSingleUseSharedByInstances(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	a, _ := newEdge(t, rdb, edge.Config{})
	b, _ := newEdge(t, rdb, edge.Config{})
	ctx := context.Background()

	// Issued by one instance, checked by the other, forgiving case and
	// white space; then never again.
	id, answer := newCaptcha(t, a.Captchas)
	require.NoError(t, b.Captchas.Check(ctx, id, " "+strings.ToUpper(answer[:2])+" \t"+answer[2:]+"\n"))
	require.ErrorIs(t, a.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid)
	require.ErrorIs(t, b.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid)

	// A wrong answer burns it.
	id, answer = newCaptcha(t, a.Captchas)
	require.ErrorIs(t, b.Captchas.Check(ctx, id, answer+"0"), apperr.ErrCaptchaInvalid)
	require.ErrorIs(t, a.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid)

	// An empty answer burns it too.
	id, answer = newCaptcha(t, a.Captchas)
	require.ErrorIs(t, b.Captchas.Check(ctx, id, "  "), apperr.ErrCaptchaInvalid)
	require.ErrorIs(t, a.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid)

	// mojocn/base64Captcha#94 and friends: never a match.
	for _, c := range [][2]string{
		{"", ""}, {"", answer}, {"unknownid", ""}, {"unknownid", "12345"},
		{"../etc", "1"}, {"a b", "1"}, {strings.Repeat("a", 65), "1"}, {"id\x00", "1"},
	} {
		require.ErrorIs(t, a.Captchas.Check(ctx, c[0], c[1]), apperr.ErrCaptchaInvalid, "%q", c)
	}
	store := edge.NewRedisStore(rdb, time.Minute)
	require.False(t, store.Verify("unknownid", "", true))
	require.False(t, store.Verify("", "", true))
}

func TestCaptchaExpires(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{CaptchaTTL: 300 * time.Millisecond})
	id, answer := newCaptcha(t, e.Captchas)
	time.Sleep(400 * time.Millisecond)
	require.ErrorIs(t, e.Captchas.Check(context.Background(), id, answer), apperr.ErrCaptchaInvalid)
}

func TestCaptchaGateOnlyForVouchersThatRequireIt(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{})
	var sold atomic.Int64
	ctx := context.Background()

	free := chain(e.Steps(), seckill.Voucher{ID: 1}, accept(&sold))
	_, err := free(ctx, attempt(1, 7))
	require.NoError(t, err)

	guarded := chain(e.Steps(), seckill.Voucher{ID: 2, CaptchaRequired: true}, accept(&sold))
	_, err = guarded(ctx, attempt(2, 7))
	require.ErrorIs(t, err, apperr.ErrCaptchaInvalid)

	id, answer := newCaptcha(t, e.Captchas)
	a := attempt(2, 7)
	a.CaptchaID, a.CaptchaAnswer = id, answer
	_, err = guarded(ctx, a)
	require.NoError(t, err)
	_, err = guarded(ctx, a)
	require.ErrorIs(t, err, apperr.ErrCaptchaInvalid)
	require.EqualValues(t, 2, sold.Load())
}

// The contract: the same Idempotency-Key from the same user for the same voucher
// returns the same order however often it is sent. The first attempt burns
// the captcha, so a retry of a request whose answer was lost must not be
// asked for it again: reserve.lua replays the first order. A new key, or the
// same key from another user, still needs a fresh captcha.
func TestCaptchaSkippedForIdempotentRetry(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{})
	v := warm(t, rdb, 10)
	v.CaptchaRequired = true
	buy := chainKnown(e.Steps(), v, buyWith(realBuyer(t, redisstock.New(redisstock.Config{Redis: rdb}))), stockKeys{redisstock.New(redisstock.Config{Redis: rdb})})
	ctx := context.Background()

	id, answer := newCaptcha(t, e.Captchas)
	keyed := func(userID int64, key string) *pipe.Attempt {
		a := attempt(v.ID, userID)
		a.Request.RequestKey = key
		a.CaptchaID, a.CaptchaAnswer = id, answer
		return a
	}
	first, err := buy(ctx, keyed(7, "retry-me"))
	require.NoError(t, err)

	// The answer was lost on the wire; the client sends the very same request.
	again, err := buy(ctx, keyed(7, "retry-me"))
	require.NoError(t, err, "an idempotent retry must get its order, not captcha_invalid")
	require.Equal(t, first.OrderID, again.OrderID)

	_, err = buy(ctx, keyed(7, "another"))
	require.ErrorIs(t, err, apperr.ErrCaptchaInvalid, "a new request needs a new captcha")
	_, err = buy(ctx, keyed(8, "retry-me"))
	require.ErrorIs(t, err, apperr.ErrCaptchaInvalid, "another user's key is not this one's")
	left, err := redisstock.New(redisstock.Config{Redis: rdb}).StockLeft(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 9, left[v.ID], "the retry sold nothing")
}

// The audio captcha is the same captcha spoken: a WAV, its answer in the
// same store, judged once like an image's.
func TestAudioCaptchaAnsweredLikeTheImage(t *testing.T) {
	t.Parallel()
	rdb := stack.Redis(t)
	e, _ := newEdge(t, rdb, edge.Config{})
	ctx := context.Background()
	id, audio, err := e.Captchas.NewAudio(ctx)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(audio, "data:audio/wav;base64,UklGR"), audio[:min(len(audio), 40)])
	answer, err := rdb.Get(ctx, edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err)
	require.Len(t, answer, 5)
	require.ErrorIs(t, e.Captchas.Check(ctx, id, ""), apperr.ErrCaptchaInvalid)
	require.ErrorIs(t, e.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid, "an empty answer burned it")

	id, _, err = e.Captchas.NewAudio(ctx)
	require.NoError(t, err)
	answer, err = rdb.Get(ctx, edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err)
	require.NoError(t, e.Captchas.Check(ctx, id, answer))
	require.ErrorIs(t, e.Captchas.Check(ctx, id, answer), apperr.ErrCaptchaInvalid)
}
