package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// memCaptchas and memBreaker stand in for the edge package (which imports
// this one, so its real types are tested over HTTP in gateway/edge).
// Its captcha capN is answered "answerN", once.
type memCaptchas struct {
	mu    sync.Mutex
	n     int
	spent map[string]bool
}

func (m *memCaptchas) New(context.Context) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	return fmt.Sprintf("cap%d", m.n), "data:image/png;base64,iVBORw0KGgo=", nil
}

func (m *memCaptchas) Check(_ context.Context, id, answer string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.spent == nil {
		m.spent = map[string]bool{}
	}
	n, err := strconv.Atoi(strings.TrimPrefix(id, "cap"))
	ok := err == nil && strings.HasPrefix(id, "cap") && n >= 1 && n <= m.n && !m.spent[id] && answer == fmt.Sprintf("answer%d", n)
	m.spent[id] = true
	if !ok {
		return fmt.Errorf("%w: missing, wrong, expired or already used", apperr.ErrCaptchaInvalid)
	}
	return nil
}

type memBreaker struct {
	mu   sync.Mutex
	mode string
}

func (m *memBreaker) Status() (string, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mode, "closed"
}

func (m *memBreaker) Switch(_ context.Context, mode string) error {
	if mode != "auto" && mode != "open" && mode != "closed" {
		return fmt.Errorf("%w: mode must be auto, open or closed", apperr.ErrInvalidInput)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mode = mode
	return nil
}

func TestCaptchaRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ *Config, d *testDeps) { d.Captchas = &memCaptchas{} })
	resp, body := b.do(t, "GET", "/api/v1/captcha", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	out := decode[api.Captcha](t, body)
	require.Equal(t, "cap1", out.CaptchaID)
	require.True(t, strings.HasPrefix(out.Image, "data:image/png;base64,"))

	none := setup(t)
	resp, body = none.do(t, "GET", "/api/v1/captcha", "")
	requireAPIError(t, resp, body, http.StatusServiceUnavailable, "unavailable")
}

// GET /api/v1/captcha is anonymous and each captcha costs an image and a
// Redis write: the per-IP limit of the credential routes guards it, so one
// client cannot flood captcha generation.
func TestCaptchaRouteIsLimitedPerIP(t *testing.T) {
	t.Parallel()
	caps := &memCaptchas{}
	var mu sync.Mutex
	var seen []string
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Captchas = caps
		d.Gates.CaptchaIssue = ipLimiterFunc(func(_ context.Context, ip string) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, ip)
			if len(seen) > 1 {
				return apperr.WithRetryAfter(apperr.ErrRateLimited, 20*time.Second)
			}
			return nil
		})
	})
	resp, body := b.do(t, "GET", "/api/v1/captcha", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	resp, body = b.do(t, "GET", "/api/v1/captcha", "")
	requireAPIError(t, resp, body, http.StatusTooManyRequests, "rate_limited")
	require.Equal(t, "20", resp.Header.Get("Retry-After"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"127.0.0.1", "127.0.0.1"}, seen)
	require.Equal(t, 1, caps.n, "a refused client gets no captcha made")

	// Captchas have their own budget: asking for them never spends the
	// budget of logging in (many shoppers may share one address).
	logins := 0
	b2 := setup(t, func(_ *Config, d *testDeps) {
		d.Captchas = caps
		d.Gates.CaptchaIssue = ipLimiterFunc(func(context.Context, string) error { return nil })
		d.Gates.Credentials = ipLimiterFunc(func(context.Context, string) error { logins++; return nil })
	})
	for range 3 {
		resp, body = b2.do(t, "GET", "/api/v1/captcha", "")
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	}
	require.Zero(t, logins)
}

func TestBreakerAdminRoutes(t *testing.T) {
	t.Parallel()
	br := &memBreaker{mode: "auto"}
	b := setup(t, func(_ *Config, d *testDeps) { d.Breaker = br })
	admin := []string{"Authorization", bearerOf(testAdminToken)}

	resp, body := b.do(t, "GET", "/api/v1/admin/breaker", "", admin...)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, api.Breaker{Mode: "auto", State: "closed"}, decode[api.Breaker](t, body))

	resp, body = b.do(t, "PUT", "/api/v1/admin/breaker", `{"mode":"open"}`, admin...)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Equal(t, "open", decode[api.Breaker](t, body).Mode)

	for _, bad := range []string{`{"mode":"half"}`, `{"mode":"open","x":1}`, `{}`, `{"mode":"open"} {}`, `[`} {
		resp, body = b.do(t, "PUT", "/api/v1/admin/breaker", bad, admin...)
		requireAPIError(t, resp, body, http.StatusBadRequest, "invalid_input")
	}
	resp, body = b.do(t, "PUT", "/api/v1/admin/breaker", `{"mode":"auto"}`, "Authorization", bearerOf(b.shopper))
	require.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, resp.StatusCode, "%s", body)
	resp, body = b.do(t, "PUT", "/api/v1/admin/breaker", `{"mode":"auto"}`)
	requireAPIError(t, resp, body, http.StatusUnauthorized, "unauthenticated")
	mode, _ := br.Status()
	require.Equal(t, "open", mode, "refused calls changed nothing")
}

// FuzzBreakerMode throws arbitrary bodies at PUT /api/v1/admin/breaker: no
// panic, 200 or an error of the error table.
func FuzzBreakerMode(f *testing.F) {
	for _, s := range []string{`{"mode":"open"}`, `{"mode":"auto"}`, `{"mode":""}`, `{"mode":1}`, `{"mode":"closed","x":0}`, `null`, "\x00"} {
		f.Add(s)
	}
	bb := setup(f, func(_ *Config, d *testDeps) {
		d.Logger = slog.New(slog.DiscardHandler)
		d.Breaker = &memBreaker{mode: "auto"}
	})
	h := bb.srv.App().Handler()
	f.Fuzz(func(t *testing.T, body string) { checkAdminBody(t, h, "PUT", "/api/v1/admin/breaker", body, 200) })
}
