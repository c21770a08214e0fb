package gateway

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deps := b.srv.deps
	_, err := New(Config{AdminToken: "short"}, deps)
	require.ErrorContains(t, err, "admin token")

	deps.Buy = nil
	deps.Stats = nil
	_, err = New(Config{AdminToken: testAdminToken}, deps)
	require.ErrorContains(t, err, "Buy")
	require.ErrorContains(t, err, "Stats")

	deps = b.srv.deps
	deps.Checks = []Check{{Name: "redis"}}
	_, err = New(Config{AdminToken: testAdminToken}, deps)
	require.Error(t, err)

	deps = b.srv.deps
	for _, bad := range []string{"10.0.0.300", "10.0.0.0/33", "proxy.internal", ""} {
		_, err = New(Config{AdminToken: testAdminToken, TrustedProxies: []string{bad}}, deps)
		require.ErrorContains(t, err, "trusted proxy", "%q", bad)
	}
}

// A mistyped SECKILL_ALLOWED_ORIGINS ("shop.example" without a scheme, or
// "*" beside other origins) made Fiber's cors.New panic inside New: a crash
// with a stack trace at start-up instead of New's configuration error.
func TestBadAllowedOriginIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	deps := setup(t).srv.deps
	for _, origins := range [][]string{
		{"shop.example"}, {"*", "https://shop.example"}, {"https://shop.example", "*"},
		{"ftp://shop.example"}, {"https://"}, {"https://shop.example/path"}, {"https://*.example"},
		{"https://shop.example?x=1"}, {"https://user@shop.example"}, {"https://a.example,https://b.example"}, {""},
	} {
		require.NotPanics(t, func() {
			_, err := New(Config{AdminToken: testAdminToken, AllowedOrigins: origins}, deps)
			require.ErrorContains(t, err, "allowed origin", "%q", origins)
		}, "%q", origins)
	}
	for _, origins := range [][]string{
		{"*"}, {"https://shop.example"}, {"http://localhost:8080", "https://shop.example/"},
	} {
		_, err := New(Config{AdminToken: testAdminToken, AllowedOrigins: origins}, deps)
		require.NoError(t, err, "%q", origins)
	}
}

func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	b := setup(t)
	shopper := []string{"Authorization", bearerOf(b.shopper)}
	admin := []string{"Authorization", bearerOf(testAdminToken)}
	buyPath := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	good := `{"title":"t","kind":"seckill","price_cents":100,"stock":10,"per_user_limit":1,` +
		`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"}`

	cases := []struct {
		name, path, body, want string
		headers                []string
	}{
		{"unknown field", "/api/v1/users", `{"username":"bob12","password":"password1","admin":true}`, `unknown field "admin"`, nil},
		{"trailing object", "/api/v1/users", `{"username":"bob12","password":"password1"}{"x":1}`, "exactly one JSON object", nil},
		{"trailing garbage", "/api/v1/users", `{"username":"bob12","password":"password1"} x`, "exactly one JSON object", nil},
		{"wrong type", "/api/v1/users", `{"username":5,"password":"password1"}`, `field "username" must be a string`, nil},
		{"array", "/api/v1/users", `[1,2]`, "must be a JSON object", nil},
		{"not JSON", "/api/v1/users", `username=bob`, "not valid JSON", nil},
		{"truncated", "/api/v1/users", `{"username":"bob12"`, "not valid JSON", nil},
		{"empty body", "/api/v1/users", ``, "needs a JSON body", nil},
		{"bad username", "/api/v1/users", `{"username":"b b","password":"password1"}`, "username must be", nil},
		{"short password", "/api/v1/users", `{"username":"bob12","password":"short"}`, "password must be", nil},
		{"quantity string", buyPath, `{"quantity":"2"}`, `field "quantity" must be a whole number`, shopper},
		{"quantity fraction", buyPath, `{"quantity":1.5}`, `field "quantity" must be a whole number`, shopper},
		{"quantity overflow", buyPath, `{"quantity":99999999999999999999}`, `field "quantity" must be a whole number`, shopper},
		{"quantity zero", buyPath, `{"quantity":0}`, "quantity must be 1 to 100", shopper},
		{"quantity negative", buyPath, `{"quantity":-1}`, "quantity must be 1 to 100", shopper},
		{"buy unknown field", buyPath, `{"quantity":1,"price":0}`, `unknown field "price"`, shopper},
		{"key too long", buyPath, `{}`, "at most 64", append([]string{"Idempotency-Key", strings.Repeat("k", 65)}, shopper...)},
		{"key with space", buyPath, `{}`, "visible ASCII", append([]string{"Idempotency-Key", "a b"}, shopper...)},
		{"voucher missing field", "/api/v1/admin/vouchers", `{"title":"t"}`, "kind is required", admin},
		{"voucher bad time", "/api/v1/admin/vouchers", strings.Replace(good, "2030-01-01T00:00:00Z", "tomorrow", 1), "begin_at must be an RFC 3339 time", admin},
		{"voucher bad kind", "/api/v1/admin/vouchers", strings.Replace(good, `"seckill"`, `"lottery"`, 1), "kind must be", admin},
		{"voucher window", "/api/v1/admin/vouchers", strings.Replace(good, "2030-01-02", "2029-01-02", 1), "end_at must be after begin_at", admin},
		{"voucher stock", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":0`, 1), "stock must be", admin},
		{"voucher price negative", "/api/v1/admin/vouchers", strings.Replace(good, `"price_cents":100`, `"price_cents":-1`, 1), "price_cents must be", admin},
		{"voucher shards zero", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"shards":0`, 1), "shards must be 1 to 64", admin},
		{"voucher shards too many", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"shards":65`, 1), "shards must be 1 to 64", admin},
		{"voucher shards fraction", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"shards":1.5`, 1), `field "shards" must be a whole number`, admin},
		{"room without rate", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"waiting_room":{"prequeue_seconds":60}`, 1), "waiting_room.admit_per_second is required", admin},
		{"room unknown field", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"waiting_room":{"admit_per_second":5,"size":9}`, 1), `unknown field "size"`, admin},
		{"adaptive room without bounds", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"waiting_room":{"admit_per_second":5,"adaptive":{"target_p99_ms":50}}`, 1), "waiting_room.adaptive.min_per_second is required", admin},
		{"adaptive room unknown field", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"waiting_room":{"admit_per_second":5,"adaptive":{"target_p99_ms":50,"min_per_second":1,"max_per_second":9,"gain":2}}`, 1), `unknown field "gain"`, admin},
		{"room not an object", "/api/v1/admin/vouchers", strings.Replace(good, `"stock":10`, `"stock":10,"waiting_room":5`, 1), `field "waiting_room"`, admin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.do(t, "POST", tc.path, tc.body, tc.headers...)
			msg := requireAPIError(t, resp, body, 400, "invalid_input")
			require.Contains(t, msg, tc.want)
		})
	}
	require.Zero(t, b.buyer.calls.Load(), "no bad request reached the buyer")
	require.EqualValues(t, 0, b.catalog.calls.Load(), "no bad voucher reached the catalog")

	// A form is not JSON, even when it would parse.
	resp, body := b.do(t, "POST", "/api/v1/users", `{"username":"bob12","password":"password1"}`, "Content-Type", "application/x-www-form-urlencoded")
	requireAPIError(t, resp, body, 400, "invalid_input")

	// The good one passes, with a charset parameter too.
	resp, body = b.do(t, "POST", "/api/v1/admin/vouchers", good, append([]string{"Content-Type", "application/json; charset=utf-8"}, admin...)...)
	require.Equal(t, 201, resp.StatusCode, "%s", body)
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pad := func(n int) string {
		// A valid body of exactly n bytes.
		base := `{"username":"bob12","password":"`
		return base + strings.Repeat("p", n-len(base)-2) + `"}`
	}
	for _, tc := range []struct {
		name, path, auth string
		size             int
	}{
		{"one byte over, register", "/api/v1/users", "", DefaultBodyLimit + 1},
		{"64 KiB, buy", fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID), bearerOf(b.shopper), 64 << 10},
	} {
		resp, body := b.declareBody(t, tc.path, tc.size, tc.auth)
		requireAPIError(t, resp, body, 413, "too_large")
	}

	// At the limit the body is read (and judged on its content).
	resp, body := b.do(t, "POST", "/api/v1/users", pad(DefaultBodyLimit))
	msg := requireAPIError(t, resp, body, 400, "invalid_input")
	require.Contains(t, msg, "password must be")
}

func TestShopperAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	sign := func(m jwt.SigningMethod, key any, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		require.NoError(t, err)
		return s
	}
	future := time.Now().Add(time.Hour).Unix()
	good := jwt.MapClaims{"sub": "42", "exp": future}
	cases := map[string]string{
		"missing header":   "",
		"basic scheme":     "Basic YWxpY2U6cGFzc3dvcmQ=",
		"bearer, no token": "Bearer ",
		"garbage":          "Bearer not.a.token",
		"alg none":         "Bearer " + sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good),
		"RS256":            "Bearer " + sign(jwt.SigningMethodRS256, rsaKey, good),
		"HS512":            "Bearer " + sign(jwt.SigningMethodHS512, testSecret, good),
		"expired":          "Bearer " + sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": time.Now().Add(-time.Hour).Unix()}),
		"missing exp":      "Bearer " + sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42"}),
		"bad signature":    "Bearer " + sign(jwt.SigningMethodHS256, []byte("not-the-secret-not-the-secret-xx"), good),
		"sub not a user":   "Bearer " + sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "admin", "exp": future}),
		"admin token":      "Bearer " + testAdminToken,
	}
	buyPath := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			var headers []string
			if h != "" {
				headers = []string{"Authorization", h}
			}
			resp, body := b.do(t, "POST", buyPath, `{}`, headers...)
			requireAPIError(t, resp, body, 401, "unauthenticated")
			resp, body = b.do(t, "GET", "/api/v1/orders", "", headers...)
			requireAPIError(t, resp, body, 401, "unauthenticated")
		})
	}
	require.Zero(t, b.buyer.calls.Load())
	require.Zero(t, b.orders.calls.Load())

	resp, body := b.do(t, "GET", "/api/v1/orders", "", "Authorization", "Bearer "+sign(jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": time.Now().Add(-time.Hour).Unix()}))
	require.Contains(t, requireAPIError(t, resp, body, 401, "unauthenticated"), "expired")

	// The scheme is case-insensitive, as RFC 9110 says.
	resp, _ = b.do(t, "GET", "/api/v1/orders", "", "Authorization", "bearer "+b.shopper)
	require.Equal(t, 200, resp.StatusCode)
}

func TestAdminToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.stats.mu.Lock()
	b.stats.stats[b.onSale.ID] = orders.Stats{
		VoucherID: b.onSale.ID, StockTotal: 100, StockLeft: 90,
		Orders: map[orders.Status]int64{orders.StatusReserved: 2, orders.StatusCreated: 5, orders.StatusPaid: 3, orders.StatusCancelled: 1, orders.StatusFailed: 0},
	}
	b.stats.mu.Unlock()
	path := fmt.Sprintf("/api/v1/admin/vouchers/%d/stats", b.onSale.ID)

	resp, body := b.do(t, "GET", path, "")
	requireAPIError(t, resp, body, 401, "unauthenticated")
	resp, body = b.do(t, "GET", path, "", "Authorization", "Bearer "+testAdminToken+"x")
	requireAPIError(t, resp, body, 401, "unauthenticated")
	resp, body = b.do(t, "GET", path, "", "Authorization", "Bearer "+testAdminToken[:len(testAdminToken)-1])
	requireAPIError(t, resp, body, 401, "unauthenticated")
	resp, body = b.do(t, "GET", path, "", "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, 403, "forbidden")
	resp, body = b.do(t, "POST", "/api/v1/admin/vouchers", `{}`, "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, 403, "forbidden")
	require.Zero(t, b.stats.calls.Load())

	resp, body = b.do(t, "GET", path, "", "Authorization", "Bearer "+testAdminToken)
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	require.JSONEq(t, fmt.Sprintf(`{"voucher_id":"%d","stock_total":100,"stock_left":90,"reserved":2,"created":5,"paid":3,"cancelled":1,"failed":0}`, b.onSale.ID), string(body))

	resp, body = b.do(t, "GET", "/api/v1/admin/vouchers/12345/stats", "", "Authorization", "Bearer "+testAdminToken)
	requireAPIError(t, resp, body, 404, "not_found")
}

func TestIDValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	bad := []string{"abc", "0", "-1", "+1", "01", "1.5", "1e3", "9223372036854775808", "99999999999999999999", "%201", "0x10"}
	routes := []struct {
		method, pattern string
		headers         []string
	}{
		{"GET", "/api/v1/vouchers/%s", nil},
		{"POST", "/api/v1/vouchers/%s/orders", []string{"Authorization", bearerOf(b.shopper)}},
		{"GET", "/api/v1/orders/%s", []string{"Authorization", bearerOf(b.shopper)}},
		{"GET", "/api/v1/admin/vouchers/%s/stats", []string{"Authorization", "Bearer " + testAdminToken}},
	}
	for _, r := range routes {
		for _, id := range bad {
			resp, body := b.do(t, r.method, fmt.Sprintf(r.pattern, id), "", r.headers...)
			msg := requireAPIError(t, resp, body, 400, "invalid_input")
			require.Contains(t, msg, "must be a positive decimal number", "%s %s", r.method, id)
		}
	}
	require.Zero(t, b.catalog.calls.Load(), "no store touched by a bad id")
	require.Zero(t, b.buyer.calls.Load())
	require.Zero(t, b.orders.calls.Load())
	require.Zero(t, b.stats.calls.Load())

	resp, _ := b.do(t, "GET", "/api/v1/vouchers/9223372036854775807", "")
	require.Equal(t, 404, resp.StatusCode, "the largest int64 is a valid id")
}

func TestAccountsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, "POST", "/api/v1/users", `{"username":"carol","password":"carol-pass"}`)
	require.Equal(t, 201, resp.StatusCode, "%s", body)
	u := decode[map[string]any](t, body)
	require.Equal(t, map[string]any{"id": "1", "username": "carol"}, u)

	resp, body = b.do(t, "POST", "/api/v1/sessions", `{"username":"carol","password":"carol-pass"}`)
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	s := decode[map[string]string](t, body)
	require.Equal(t, "1", s["user_id"])
	exp, err := time.Parse(time.RFC3339, s["expires_at"])
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(s["expires_at"], "Z"), "UTC")
	require.WithinDuration(t, time.Now().Add(time.Hour), exp, 5*time.Second)

	// The token buys.
	resp, body = b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID), "", "Authorization", bearerOf(s["token"]))
	require.Equal(t, 202, resp.StatusCode, "%s", body)
	require.Equal(t, int64(1), b.buyer.requests()[0].UserID)

	resp, body = b.do(t, "POST", "/api/v1/sessions", `{"username":"nobody","password":"carol-pass"}`)
	unknown := requireAPIError(t, resp, body, 401, "unauthenticated")
	resp, body = b.do(t, "POST", "/api/v1/sessions", `{"username":"carol","password":"wrong-pass"}`)
	wrong := requireAPIError(t, resp, body, 401, "unauthenticated")
	require.Equal(t, wrong, unknown, "an unknown user and a wrong password read the same")
}

func TestCredentialsGate(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Gates.Credentials = ipLimiterFunc(func(_ context.Context, ip string) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, ip)
			return apperr.WithRetryAfter(apperr.ErrRateLimited, 30*time.Second)
		})
	})
	resp, body := b.do(t, "POST", "/api/v1/sessions", `{"username":"carol","password":"carol-pass"}`)
	requireAPIError(t, resp, body, 429, "rate_limited")
	require.Equal(t, "30", resp.Header.Get("Retry-After"))
	resp, body = b.do(t, "POST", "/api/v1/users", `not even JSON`)
	requireAPIError(t, resp, body, 429, "rate_limited")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2, "the limit counts every attempt, before the body is read")
	require.NotEmpty(t, seen[0])
}

type ipLimiterFunc func(ctx context.Context, ip string) error

func (f ipLimiterFunc) Allow(ctx context.Context, ip string) error { return f(ctx, ip) }

func TestVouchers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", "Bearer " + testAdminToken}
	resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
		`{"title":"Noon deal","kind":"limit","price_cents":1999,"stock":50,"per_user_limit":2,`+
			`"begin_at":"2030-01-01T08:00:00+08:00","end_at":"2030-01-02T00:00:00Z","captcha_required":true}`, admin...)
	require.Equal(t, 201, resp.StatusCode, "%s", body)
	require.JSONEq(t, `{"id":"2","title":"Noon deal","kind":"limit","price_cents":1999,"currency":"CNY","stock_total":50,"stock_left":50,`+
		`"per_user_limit":2,"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z","captcha_required":true,"challenge":"captcha","state":"scheduled","shards":1,"waiting_room":null,"draw":null,"entry":null,"grace_seconds":600}`, string(body),
		"times come back in UTC")

	resp, body = b.do(t, "GET", "/api/v1/vouchers/2", "")
	require.Equal(t, 200, resp.StatusCode)
	require.Contains(t, string(body), `"id":"2"`)

	resp, body = b.do(t, "GET", "/api/v1/vouchers", "")
	require.Equal(t, 200, resp.StatusCode)
	list := decode[[]api.Voucher](t, body)
	require.Len(t, list, 2)
	require.Equal(t, "2", list[0].ID, "newest first")

	// An empty list is [], not null.
	b.catalog.mu.Lock()
	b.catalog.vouchers = map[int64]seckill.Voucher{}
	b.catalog.dirty = true
	b.catalog.mu.Unlock()
	_, body = b.do(t, "GET", "/api/v1/vouchers", "")
	require.Equal(t, "[]", string(body))

	// A store that is down is a 503, with no driver words.
	b.catalog.mu.Lock()
	b.catalog.err = fmt.Errorf("%w: failed to connect to `host=10.1.2.3 user=seckill`", apperr.ErrUnavailable)
	b.catalog.mu.Unlock()
	resp, body = b.do(t, "GET", "/api/v1/vouchers", "")
	msg := requireAPIError(t, resp, body, 503, "unavailable")
	require.NotContains(t, msg, "10.1.2.3")
}

func TestOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)
	b.orders.mu.Lock()
	b.orders.orders = []orders.Order{
		{ID: 11, VoucherID: 1, UserID: 42, Quantity: 1, AmountCents: 500, Status: orders.StatusCreated, CreatedAt: base, PayDeadline: base.Add(15 * time.Minute)},
		{ID: 13, VoucherID: 1, UserID: 42, Quantity: 2, AmountCents: 1000, Status: orders.StatusReserved, CreatedAt: base.Add(2 * time.Second)},
		{ID: 12, VoucherID: 1, UserID: 43, Quantity: 1, AmountCents: 500, Status: orders.StatusPaid, CreatedAt: base.Add(time.Second), PayDeadline: base.Add(15 * time.Minute)},
	}
	reserved := b.orders.orders[1]
	b.orders.mu.Unlock()
	me := []string{"Authorization", bearerOf(b.shopper)}

	resp, body := b.do(t, "GET", "/api/v1/orders", "", me...)
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `[
		{"order_id":"13","voucher_id":"1","user_id":"42","quantity":2,"amount_cents":1000,"status":"reserved","created_at":"2030-05-01T12:00:02Z","pay_deadline":null,"payment":null},
		{"order_id":"11","voucher_id":"1","user_id":"42","quantity":1,"amount_cents":500,"status":"created","created_at":"2030-05-01T12:00:00Z","pay_deadline":"2030-05-01T12:15:00Z","payment":null}
	]`, string(body), "own orders only, newest first")

	resp, body = b.do(t, "GET", "/api/v1/orders/13", "", me...)
	require.Equal(t, 200, resp.StatusCode, "a reserved order is readable at once")
	require.Equal(t, notify.OrderJSON(reserved), decode[api.Order](t, body), "the same shape as the socket's")

	resp, body = b.do(t, "GET", "/api/v1/orders/12", "", me...)
	requireAPIError(t, resp, body, 404, "not_found")

	_, body = b.do(t, "GET", "/api/v1/orders", "", "Authorization", bearerOf(b.shopper2))
	require.Contains(t, string(body), `"order_id":"12"`)
	require.NotContains(t, string(body), `"order_id":"11"`)

	// An empty list is [].
	tok, _, err := b.tokens.Issue(99)
	require.NoError(t, err)
	_, body = b.do(t, "GET", "/api/v1/orders", "", "Authorization", bearerOf(tok))
	require.Equal(t, "[]", string(body))
}

// ownerBlind is an OrderReader that forgets to check the owner; the gateway
// must not leak through it.
type ownerBlind struct{ o orders.Order }

func (r ownerBlind) Get(context.Context, int64, int64) (orders.Order, error) { return r.o, nil }
func (r ownerBlind) List(context.Context, int64) ([]orders.Order, error) {
	return []orders.Order{r.o}, nil
}
func (r ownerBlind) Page(context.Context, int64, orders.Page) ([]orders.Order, bool, error) {
	return []orders.Order{r.o}, false, nil
}

func TestOrdersNeverLeakAcrossUsers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Orders = ownerBlind{o: orders.Order{ID: 5, UserID: 43, Status: orders.StatusPaid}}
	})
	resp, body := b.do(t, "GET", "/api/v1/orders/5", "", "Authorization", bearerOf(b.shopper))
	requireAPIError(t, resp, body, http.StatusNotFound, "not_found")
	_, body = b.do(t, "GET", "/api/v1/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, "[]", string(body))
}
