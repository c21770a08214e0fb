package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// The edge gates through the real gateway, over HTTP, on the real services.

func TestUserRateLimitOverHTTP(t *testing.T) {
	ts := startSystem(t, map[string]string{"SECKILL_USER_RATE": "2", "SECKILL_USER_BURST": "2"})
	vid := ts.createVoucher(t, 1000, 100, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	greedy, other := ts.shopper(t, 71), ts.shopper(t, 72)

	var limited answer
	for i := range 6 {
		a := ts.buy(t, vid, greedy, 1, "g-"+strconv.Itoa(i))
		if a.status == http.StatusTooManyRequests {
			limited = a
			break
		}
		require.Equal(t, http.StatusAccepted, a.status, "%s", a.raw)
	}
	require.Equal(t, http.StatusTooManyRequests, limited.status, "six buys at once must pass a limit of 2/s with burst 2")
	require.Equal(t, "rate_limited", limited.errorCode())
	wait, err := strconv.Atoi(limited.header.Get("Retry-After"))
	require.NoError(t, err, "429 carries Retry-After in seconds")
	require.GreaterOrEqual(t, wait, 1)
	require.NotEmpty(t, limited.header.Get("RateLimit-Limit"))

	// Another shopper is not affected.
	require.Equal(t, http.StatusAccepted, ts.buy(t, vid, other, 1, "o-1").status)
	// Honouring Retry-After lets the next request through.
	time.Sleep(time.Duration(wait) * time.Second)
	after := ts.buy(t, vid, greedy, 1, "g-after")
	require.Equal(t, http.StatusAccepted, after.status, "%s", after.raw)
}

func TestCaptchaOverHTTP(t *testing.T) {
	ts := startSystem(t, nil)
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "captcha voucher", "kind": "seckill", "price_cents": 100, "stock": 10, "per_user_limit": 5,
		"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "captcha_required": true,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	vid := a.body["id"].(string)
	token := ts.shopper(t, 81)

	// newCaptcha asks the API for a captcha and reads its answer where the
	// gateway keeps it, as a person would read the picture.
	newCaptcha := func() (id, answer string) {
		c := ts.do(t, http.MethodGet, "/api/v1/captcha", "", nil, nil)
		require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
		require.True(t, strings.HasPrefix(c.body["image"].(string), "data:image/png;base64,"))
		id = c.body["captcha_id"].(string)
		answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
		require.NoError(t, err)
		return id, answer
	}
	buyWith := func(id, answer, key string) answer {
		return ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/orders", token,
			map[string]any{"quantity": 1, "captcha_id": id, "captcha_answer": answer}, map[string]string{"Idempotency-Key": key})
	}

	for name, a := range map[string]answer{
		"missing":  ts.buy(t, vid, token, 1, "none"),
		"empty id": buyWith("", "12345", "empty"),
		"unknown":  buyWith("nosuchcaptcha", "12345", "unknown"),
	} {
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", name, a.raw)
		require.Equal(t, "captcha_invalid", a.errorCode(), name)
	}

	id, right := newCaptcha()
	wrong := buyWith(id, right+"9", "wrong")
	require.Equal(t, "captcha_invalid", wrong.errorCode())
	burned := buyWith(id, right, "burned")
	require.Equal(t, "captcha_invalid", burned.errorCode(), "a wrong answer burns the captcha")

	id, right = newCaptcha()
	ok := buyWith(id, "  "+strings.ToUpper(right)+" ", "right")
	require.Equal(t, http.StatusAccepted, ok.status, "the right answer passes, case and spaces forgiven: %s", ok.raw)
	reused := buyWith(id, right, "reused")
	require.Equal(t, "captcha_invalid", reused.errorCode(), "a captcha is single use")
}

func TestBreakerOpsSwitchAcrossInstances(t *testing.T) {
	ts := startSystem(t, nil)
	t.Cleanup(func() { ts.rdb.Del(context.Background(), "seckill:breaker:mode") })
	b := ts.startPeer(t, gatewayOnly)
	vid := ts.createVoucher(t, 100, 100, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	token := ts.shopper(t, 91)

	setMode := func(mode string) {
		a := ts.do(t, http.MethodPut, "/api/v1/admin/breaker", ts.cfg.AdminToken, map[string]any{"mode": mode}, nil)
		require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
		require.Equal(t, mode, a.body["mode"])
	}
	waitAll := func(want int, instances ...*testSystem) {
		start := time.Now()
		for i, inst := range instances {
			require.Eventually(t, func() bool {
				return inst.buy(t, vid, token, 1, "").status == want
			}, time.Second, 20*time.Millisecond, "instance %d did not obey within 1 s", i)
		}
		t.Logf("every instance answered %d after %v", want, time.Since(start))
	}

	setMode("open")
	waitAll(http.StatusServiceUnavailable, ts, b.testSystem)
	shut := b.buy(t, vid, token, 1, "")
	require.Equal(t, "unavailable", shut.errorCode())
	require.NotEmpty(t, shut.header.Get("Retry-After"))
	state := b.do(t, http.MethodGet, "/api/v1/admin/breaker", ts.cfg.AdminToken, nil, nil)
	require.Equal(t, "open", state.body["mode"])

	// An instance started while the door is shut obeys from the start.
	c := ts.startPeer(t, gatewayOnly)
	require.Equal(t, http.StatusServiceUnavailable, c.buy(t, vid, token, 1, "").status)

	setMode("auto")
	waitAll(http.StatusAccepted, ts, b.testSystem, c.testSystem)
}
