package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/apperr"
)

// refusingIPs refuses every request once it has seen limit of them, and
// records the keys it was asked about.
type refusingIPs struct {
	recordingIPs
	limit int
}

func (r *refusingIPs) Allow(ctx context.Context, key string) error {
	_ = r.recordingIPs.Allow(ctx, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ips) > r.limit {
		return apperr.WithRetryAfter(apperr.ErrRateLimited, 2*time.Second)
	}
	return nil
}

// Every anonymous route is behind the per-address limit, keyed on the
// client's address as clientKey gives it; routes that are not anonymous
// (probes, a shopper's own orders) are not.
func TestEveryAnonymousRouteIsLimitedPerAddress(t *testing.T) {
	t.Parallel()
	lim := &refusingIPs{}
	b := setup(t, func(c *Config, d *testDeps) {
		c.TrustedProxies = []string{"127.0.0.1"}
		d.Gates.Anonymous = lim
		d.Live.Feed = nil
	})
	vid := strconv.FormatInt(b.onSale.ID, 10)
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/vouchers", ""},
		{http.MethodGet, "/api/v1/vouchers/" + vid, ""},
		{http.MethodGet, "/api/v1/captcha", ""},
		{http.MethodPost, "/api/v1/users", `{"username":"someone","password":"whatever1"}`},
		{http.MethodPost, "/api/v1/sessions", `{"username":"someone","password":"whatever1"}`},
		{http.MethodGet, "/api/v1/ws", ""},
	} {
		resp, body := b.do(t, r.method, r.path, r.body, "X-Forwarded-For", "2001:db8:1:2::77")
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s %s: %s", r.method, r.path, body)
		require.Equal(t, "2", resp.Header.Get("Retry-After"), "%s %s", r.method, r.path)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, "rate_limited", e.Error.Code)
		require.Equal(t, "2001:db8:1::/56", lim.last(t), "keyed on the /56")
	}
	asked := len(lim.ips)
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml"} {
		resp, _ := b.do(t, http.MethodGet, path, "")
		require.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode, path)
	}
	resp, _ := b.do(t, http.MethodGet, "/api/v1/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, lim.ips, asked, "probes and a shopper's own routes are not anonymous")
}

// recordingNames is a NameLimiter that refuses the names in refuse and
// records what it charges and gives back.
type recordingNames struct {
	mu       sync.Mutex
	refuse   map[string]bool
	taken    []string
	refunded []string
}

func (r *recordingNames) Take(_ context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse[name] {
		return apperr.WithRetryAfter(apperr.ErrRateLimited, time.Minute)
	}
	r.taken = append(r.taken, name)
	return nil
}

func (r *recordingNames) Refund(_ context.Context, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refunded = append(r.refunded, name)
}

// Login takes a unit of the username's budget before checking the password
// and gives it back unless the password was wrong.
func TestLoginChargesTheUsernameOnlyForFailures(t *testing.T) {
	t.Parallel()
	names := &recordingNames{refuse: map[string]bool{"locked": true}}
	b := setup(t, func(_ *Config, d *testDeps) { d.Gates.LoginName = names })
	for _, u := range []string{"alice", "locked"} {
		resp, body := b.do(t, http.MethodPost, "/api/v1/users", `{"username":"`+u+`","password":"correct-horse"}`)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	}
	resp, _ := b.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"alice","password":"correct-horse"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = b.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"alice","password":"wrong-horse"}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = b.do(t, http.MethodPost, "/api/v1/sessions", `{"username":"locked","password":"correct-horse"}`)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a username out of budget is refused before its password is checked")
	require.Equal(t, "60", resp.Header.Get("Retry-After"))
	names.mu.Lock()
	defer names.mu.Unlock()
	require.Equal(t, []string{"alice", "alice"}, names.taken, "every login is charged before bcrypt")
	require.Equal(t, []string{"alice"}, names.refunded, "only the right password is given back")
}

// With captchas, a username out of budget is not locked: its logins need a
// solved captcha, which stands in for the unit, and a captcha a login
// carries is judged and spent whatever the budget says.
func TestLoginPastTheUsernameBudgetNeedsACaptcha(t *testing.T) {
	t.Parallel()
	names := &recordingNames{refuse: map[string]bool{"locked": true}}
	caps := &memCaptchas{}
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Gates.LoginName = names
		d.Captchas = caps
	})
	for _, u := range []string{"alice", "locked"} {
		resp, body := b.do(t, http.MethodPost, "/api/v1/users", `{"username":"`+u+`","password":"correct-horse"}`)
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
	}
	login := func(user, password, captcha string) (*http.Response, []byte) {
		body := `{"username":"` + user + `","password":"` + password + `"`
		if captcha != "" {
			id, _, err := caps.New(context.Background())
			require.NoError(t, err)
			body += `,"captcha_id":"` + id + `","captcha_answer":"` + captcha + strings.TrimPrefix(id, "cap") + `"`
		}
		return b.do(t, http.MethodPost, "/api/v1/sessions", body+"}")
	}
	resp, body := login("locked", "correct-horse", "")
	requireAPIError(t, resp, body, http.StatusBadRequest, "captcha_invalid")
	require.Contains(t, string(body), "GET /api/v1/captcha", "the message says what to do")
	resp, body = login("locked", "correct-horse", "wrong")
	requireAPIError(t, resp, body, http.StatusBadRequest, "captcha_invalid")
	resp, body = login("locked", "wrong-horse", "answer")
	requireAPIError(t, resp, body, http.StatusUnauthorized, "unauthenticated")
	resp, body = login("locked", "correct-horse", "answer")
	require.Equal(t, http.StatusOK, resp.StatusCode, "the owner with a solved captcha: %s", body)
	resp, body = login("alice", "correct-horse", "wrong")
	requireAPIError(t, resp, body, http.StatusBadRequest, "captcha_invalid")
	resp, body = login("alice", "correct-horse", "answer")
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	names.mu.Lock()
	defer names.mu.Unlock()
	require.Equal(t, []string{"alice"}, names.taken, "a wrong captcha is refused before the budget is asked")
	require.Equal(t, []string{"alice"}, names.refunded)
}
