package systemtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// The edge gates through the real gateway, over HTTP, on the real services.

func TestUserRateLimitOverHTTP(t *testing.T) {
	// This test is serial (main_test.go): six buys must come faster than the 2/s limit refills.
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

// captcha asks the API for a captcha, with header, and reads its answer
// where the gateway keeps it, as a person would read the picture.
func (ts *testSystem) captcha(t *testing.T, header map[string]string) (id, answer string) {
	t.Helper()
	c := ts.do(t, http.MethodGet, "/api/v1/captcha", "", nil, header)
	require.Equal(t, http.StatusOK, c.status, "%s", c.raw)
	require.True(t, strings.HasPrefix(c.body["image"].(string), "data:image/png;base64,"))
	id = c.body["captcha_id"].(string)
	answer, err := ts.rdb.Get(context.Background(), edge.CaptchaKeyPrefix+id).Result()
	require.NoError(t, err)
	return id, answer
}

func TestCaptchaOverHTTP(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, nil)
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "captcha voucher", "kind": "seckill", "price_cents": 100, "stock": 10, "per_user_limit": 5,
		"begin_at": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
		"end_at":   time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "captcha_required": true,
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "%s", a.raw)
	vid := a.body["id"].(string)
	token := ts.shopper(t, 81)

	newCaptcha := func() (id, answer string) { return ts.captcha(t, nil) }
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
	// This test is serial (main_test.go): every instance must obey within a second.
	ts := startSystem(t, nil)
	t.Cleanup(func() { ts.rdb.Del(context.Background(), edge.ModeKey) })
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
	require.Equal(t, map[string]any{"redis": "forced-open", "postgresql": "forced-open"}, state.body["paths"],
		"the answer names each dependency path's breaker, all obeying the switch")

	// An instance started while the door is shut obeys from the start.
	c := ts.startPeer(t, gatewayOnly)
	require.Equal(t, http.StatusServiceUnavailable, c.buy(t, vid, token, 1, "").status)

	setMode("auto")
	waitAll(http.StatusAccepted, ts, b.testSystem, c.testSystem)
}

// TestFairEdgeUnderAFloodingAccount is the fairness scenario: with a global
// limit of 2000/s, one account sends buys as fast as the client can, from
// ever-changing addresses (so no per-address limit holds it; an IPv6 /48
// gives a bot 256 /56s), while 100 honest shoppers, each from an address
// of their own, buy once each, spread over the same seconds. The per-user
// limit comes before the global one, so the flood is cut to the account's
// own 5/s before it can charge the budget everybody shares. Assertions are
// on counts, never on timings: the proof does not depend on how fast this
// machine floods.
func TestFairEdgeUnderAFloodingAccount(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{
		"SECKILL_GLOBAL_RATE":     "2000",
		"SECKILL_GLOBAL_BURST":    "200",
		"SECKILL_USER_RATE":       "5",
		"SECKILL_USER_BURST":      "3",
		"SECKILL_BUY_IP_RATE":     "50",
		"SECKILL_BUY_IP_BURST":    "100",
		"SECKILL_TRUSTED_PROXIES": "127.0.0.1", // the test client plays the load balancer
	})
	vid := ts.createVoucher(t, 1000, 1, time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	path := ts.base + "/api/v1/vouchers/" + vid + "/orders"
	post := func(client *http.Client, token, from string) int {
		req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(`{"quantity":1}`))
		if err != nil {
			return -1
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", from)
		resp, err := client.Do(req)
		if err != nil {
			return -1
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	botToken := ts.shopper(t, testUser())
	botClient := apiClient(t, ts.base, 64) // its answers are checked against the spec too
	t.Cleanup(botClient.CloseIdleConnections)
	stop := make(chan struct{})
	var botSent, bot429 atomic.Int64
	var botWG sync.WaitGroup
	for g := range 16 {
		botWG.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from := fmt.Sprintf("6.%d.%d.%d", g, i/256%256, i%256)
				if post(botClient, botToken, from) == http.StatusTooManyRequests {
					bot429.Add(1)
				}
				botSent.Add(1)
			}
		})
	}
	// Let the flood reach full speed before the shoppers come.
	require.Eventually(t, func() bool { return botSent.Load() >= 200 }, 30*time.Second, 5*time.Millisecond)

	const shoppers = 100
	statuses := make([]int, shoppers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range shoppers {
		token := ts.shopper(t, testUser())
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 20 * time.Millisecond) // spread over 2 s
			statuses[i] = post(ts.client, token, fmt.Sprintf("10.1.%d.%d", i/200, i%200+1))
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	sentDuring := botSent.Load()
	close(stop)
	botWG.Wait()

	counts := map[int]int{}
	not429 := 0
	for _, st := range statuses {
		counts[st]++
		if st != http.StatusTooManyRequests {
			not429++
		}
	}
	t.Logf("honest shoppers: %d of %d answered other than 429 (%.0f%%), answers %v; the bot sent %d buys (%.0f/s), %d answered 429",
		not429, shoppers, 100*float64(not429)/shoppers, counts, botSent.Load(), float64(sentDuring)/elapsed.Seconds(), bot429.Load())
	require.GreaterOrEqual(t, not429, shoppers*95/100, "at least 95 %% of the honest shoppers get an answer that is not 429: %v", counts)
	for st, n := range counts {
		require.Less(t, st, 500, "%d honest shoppers got %d", n, st)
	}
	require.Greater(t, bot429.Load(), int64(0), "the flooding account is held to its own rate")

	// The order of the limits, read from the gates' own counters: the
	// global limit saw exactly what the per-user limit let through.
	fams := ts.scrape(t)
	userPassed := counter(t, fams, "seckill_gate_allowed_total", "gate", "user_limit")
	globalSeen := counter(t, fams, "seckill_gate_allowed_total", "gate", "global_limit")
	if f, ok := fams["seckill_gate_rejections_total"]; ok { // absent when nothing was refused
		for _, m := range f.GetMetric() {
			gate, reason := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "gate":
					gate = l.GetValue()
				case "reason":
					reason = l.GetValue()
				}
			}
			// An attempt the per-user limit could not check (Redis slower
			// than the gate's bound, as on a busy machine: reason "error")
			// is let through, not refused, so the global limit sees it.
			switch {
			case gate == "global_limit" && reason == "rate_limited":
				globalSeen += m.GetCounter().GetValue()
			case gate == "user_limit" && reason == "error":
				userPassed += m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, userPassed, globalSeen, "only attempts the per-user limit let through charge the global limit")
}
