package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/gateway/i18n"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// apiTable is the error table of gateway/openapi.yaml, copied by hand: the test fails when the
// code and the contract drift apart.
var apiTable = []struct {
	sentinel error
	status   int
	code     string
}{
	{apperr.ErrInvalidInput, 400, "invalid_input"},
	{apperr.ErrCaptchaInvalid, 400, "captcha_invalid"},
	{apperr.ErrUnauthenticated, 401, "unauthenticated"},
	{apperr.ErrForbidden, 403, "forbidden"},
	{seckill.ErrUnpaidLimit, 403, "unpaid_limit"},
	{apperr.ErrNotFound, 404, "not_found"},
	{seckill.ErrSoldOut, 409, "sold_out"},
	{seckill.ErrLimitExceeded, 409, "limit_exceeded"},
	{seckill.ErrNotStarted, 409, "not_started"},
	{seckill.ErrEnded, 409, "ended"},
	{apperr.ErrConflict, 409, "conflict"},
	{apperr.ErrUsernameTaken, 409, "username_taken"},
	{apperr.ErrTooLarge, 413, "too_large"},
	{apperr.ErrRateLimited, 429, "rate_limited"},
	{seckill.ErrSalePaused, 503, "sale_paused"},
	{apperr.ErrUnavailable, 503, "unavailable"},
}

func TestClassifyEverySentinel(t *testing.T) {
	t.Parallel()
	for _, row := range apiTable {
		for _, err := range []error{
			row.sentinel,
			fmt.Errorf("redisstock: reserve voucher 7: %w", row.sentinel),
			fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", row.sentinel)),
		} {
			e := classify(err, i18n.English)
			require.Equal(t, row.status, e.row.status, err.Error())
			require.Equal(t, row.code, e.row.code, err.Error())
			require.NotContains(t, e.message, "redisstock", "the wrapping text is not shown")
			if row.status == 429 || row.status == 503 {
				require.Equal(t, time.Second, e.retryAfter)
			} else {
				require.Zero(t, e.retryAfter)
			}
		}
	}
	require.Equal(t, "this voucher is sold out", classify(seckill.ErrSoldOut, i18n.English).message, "the contract's own example")
}

func TestClassifyUnknownIsInternalAndSilent(t *testing.T) {
	t.Parallel()
	pgErr := &pgconn.PgError{Severity: "ERROR", Code: "23514", Message: `new row violates check constraint "vouchers_stock_left_check"`}
	for _, err := range []error{
		errors.New("dial tcp 10.0.0.7:5432: connect: connection refused"),
		fmt.Errorf("pgstore: %w", pgErr),
		&leaky{},
	} {
		e := classify(err, i18n.English)
		require.Equal(t, 500, e.row.status)
		require.Equal(t, "internal", e.row.code)
		require.Equal(t, internalRow.message, e.message, "an unknown error never speaks for itself")
	}
}

// leaky is an unknown error that offers a public message anyway.
type leaky struct{}

func (*leaky) Error() string         { return "secret" }
func (*leaky) PublicMessage() string { return "secret" }

func TestClassifyRetryAfterAndMessages(t *testing.T) {
	t.Parallel()
	e := classify(apperr.WithRetryAfter(fmt.Errorf("limit: %w", apperr.ErrRateLimited), 2500*time.Millisecond), i18n.English)
	require.Equal(t, 429, e.row.status)
	require.Equal(t, "3", retryAfterSeconds(e.retryAfter), "rounded up")
	require.Equal(t, "1", retryAfterSeconds(10*time.Millisecond), "never 0")

	e = classify(fmt.Errorf("buy: %w", apperr.Invalidf("quantity must be 1 to %d", 100)), i18n.English)
	require.Equal(t, "quantity must be 1 to 100", e.message)
	require.Equal(t, []api.FieldError{{Field: "", Reason: "quantity must be 1 to 100"}}, e.fields,
		"an invalid_input that names no field names the body as a whole")

	var f apperr.Fields
	f.Addf("/title", "title must be 1 to 200 characters")
	f.Addf("/waiting_room/admit_per_second", "waiting_room.admit_per_second is required")
	e = classify(fmt.Errorf("admin: %w", f.Err()), i18n.English)
	require.Equal(t, "invalid_input", e.row.code)
	require.Equal(t, "title must be 1 to 200 characters; waiting_room.admit_per_second is required", e.message)
	require.Equal(t, []api.FieldError{{Field: "/title", Reason: "title must be 1 to 200 characters"},
		{Field: "/waiting_room/admit_per_second", Reason: "waiting_room.admit_per_second is required"}}, e.fields)
	require.Nil(t, e.retryAt)

	until := time.Date(2031, 2, 3, 4, 5, 6, 0, time.FixedZone("x", 3600))
	e = classify(fmt.Errorf("buy: %w", apperr.WithRetryAt(apperr.Public(seckill.ErrUnpaidLimit, "later"), until)), i18n.English)
	require.Equal(t, "unpaid_limit", e.row.code)
	require.NotNil(t, e.retryAt)
	require.Equal(t, "2031-02-03T03:05:06Z", e.retryAt.Format(time.RFC3339), "in UTC")
	require.Empty(t, e.fields)

	e = classify(fmt.Errorf("buyer: %w", context.DeadlineExceeded), i18n.English)
	require.Equal(t, 503, e.row.status)
	require.Equal(t, "unavailable", e.row.code)

	// Fiber's own errors.
	for status, code := range map[int]string{
		404: "not_found", 405: "method_not_allowed", 413: "too_large", 431: "too_large",
		400: "invalid_input", 408: "unavailable", 429: "rate_limited", 503: "unavailable", 502: "internal",
	} {
		e := classify(fiber.NewError(status, "Cannot GET /<script>"), i18n.English)
		require.Equal(t, code, e.row.code, status)
		require.NotContains(t, e.message, "script")
	}
}

// TestErrorRowsOverHTTP drives every row of the error table that the
// gateway's own routes can produce, through HTTP.
func TestErrorRowsOverHTTP(t *testing.T) {
	t.Parallel()
	captchaGate := captchaFunc(func(_ context.Context, a *pipe.Attempt, _ bool) error {
		if a.CaptchaAnswer != "right" {
			return fmt.Errorf("captcha: %w", apperr.ErrCaptchaInvalid)
		}
		return nil
	})
	limitGate := limitFunc(func(_ context.Context, a *pipe.Attempt) error {
		if a.Request.RequestKey == "flood" {
			a.SetHeader("RateLimit-Remaining", "0")
			return apperr.WithRetryAfter(apperr.ErrRateLimited, 3*time.Second)
		}
		return nil
	})
	b := setup(t, func(_ *Config, d *testDeps) {
		d.Steps.Captcha = captchaGate
		d.Steps.User = limitGate
	})
	captchaVoucher := b.catalog.put(seckill.Voucher{Title: "c", Kind: seckill.KindSeckill, StockTotal: 1, PerUserLimit: 1, CaptchaRequired: true})
	buyerErr := map[string]error{
		"sold":     fmt.Errorf("redisstock: code 5: %w", seckill.ErrSoldOut),
		"limit":    seckill.ErrLimitExceeded,
		"early":    seckill.ErrNotStarted,
		"late":     seckill.ErrEnded,
		"conflict": apperr.ErrConflict,
		"down":     fmt.Errorf("%w: queue: kafka: client has run out of available brokers", apperr.ErrUnavailable),
		"boom":     errors.New("ERR Error running script (call to f_1234): @user_script:12: secret"),
	}
	b.buyer.setFn(func(req seckill.BuyRequest) (seckill.ReserveResult, error) {
		if err, ok := buyerErr[req.RequestKey]; ok {
			return seckill.ReserveResult{}, err
		}
		return seckill.ReserveResult{OrderID: 5}, nil
	})
	_, body := b.do(t, "POST", "/api/v1/users", `{"username":"taken","password":"password1"}`)
	require.Contains(t, string(body), `"username":"taken"`)

	buyPath := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	shopper := []string{"Authorization", bearerOf(b.shopper)}
	withKey := func(k string) []string { return append([]string{"Idempotency-Key", k}, shopper...) }

	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"malformed JSON", "POST", "/api/v1/users", `{"username":`, nil, 400, "invalid_input"},
		{"bad id", "GET", "/api/v1/vouchers/abc", "", nil, 400, "invalid_input"},
		{"quantity out of range", "POST", buyPath, `{"quantity":101}`, shopper, 400, "invalid_input"},
		{"captcha missing", "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", captchaVoucher.ID), `{}`, shopper, 400, "captcha_invalid"},
		{"captcha wrong", "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", captchaVoucher.ID), `{"captcha_id":"x","captcha_answer":"wrong"}`, shopper, 400, "captcha_invalid"},
		{"no token", "GET", "/api/v1/orders", "", nil, 401, "unauthenticated"},
		{"wrong password", "POST", "/api/v1/sessions", `{"username":"taken","password":"password2"}`, nil, 401, "unauthenticated"},
		{"shopper on admin", "GET", "/api/v1/admin/vouchers/1/stats", "", shopper, 403, "forbidden"},
		{"unknown voucher", "GET", "/api/v1/vouchers/999", "", nil, 404, "not_found"},
		{"buy unknown voucher", "POST", "/api/v1/vouchers/999/orders", "", shopper, 404, "not_found"},
		{"unknown order", "GET", "/api/v1/orders/999", "", shopper, 404, "not_found"},
		{"unknown route", "GET", "/api/v1/nope", "", nil, 404, "not_found"},
		{"sold out", "POST", buyPath, "", withKey("sold"), 409, "sold_out"},
		{"limit", "POST", buyPath, "", withKey("limit"), 409, "limit_exceeded"},
		{"not started", "POST", buyPath, "", withKey("early"), 409, "not_started"},
		{"ended", "POST", buyPath, "", withKey("late"), 409, "ended"},
		{"conflict", "POST", buyPath, "", withKey("conflict"), 409, "conflict"},
		{"username taken", "POST", "/api/v1/users", `{"username":"taken","password":"password1"}`, nil, 409, "username_taken"},
		{"too large", "POST", "/api/v1/users", `{"username":"` + strings.Repeat("a", 5000) + `"}`, nil, 413, "too_large"},
		{"rate limited", "POST", buyPath, "", withKey("flood"), 429, "rate_limited"},
		{"unavailable", "POST", buyPath, "", withKey("down"), 503, "unavailable"},
		{"internal", "POST", buyPath, "", withKey("boom"), 500, "internal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.do(t, tc.method, tc.path, tc.body, tc.headers...)
			msg := requireAPIError(t, resp, body, tc.status, tc.code)
			for _, secret := range []string{"kafka", "script", "redisstock", "pgstore", "constraint", "secret"} {
				require.NotContains(t, strings.ToLower(msg), secret, "no internals in %q", msg)
			}
		})
	}

	resp, body := b.do(t, "POST", buyPath, "", withKey("flood")...)
	requireAPIError(t, resp, body, 429, "rate_limited")
	require.Equal(t, "3", resp.Header.Get("Retry-After"), "the gate's wait, not the default")
	require.Equal(t, "0", resp.Header.Get("RateLimit-Remaining"), "a gate's headers reach the answer")

	resp, body = b.do(t, "POST", buyPath, "", withKey("down")...)
	requireAPIError(t, resp, body, 503, "unavailable")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	// The internal error is logged with its request id, and only there.
	resp, body = b.do(t, "POST", buyPath, "", append(withKey("boom"), HeaderRequestID, "trace-me-1")...)
	requireAPIError(t, resp, body, 500, "internal")
	require.Equal(t, "trace-me-1", resp.Header.Get(HeaderRequestID))
	var logged bool
	for _, l := range b.logs.JSONLines(t) {
		if l["msg"] == "request failed" && l["request_id"] == "trace-me-1" {
			logged = true
			require.Contains(t, l["error"], "@user_script:12")
		}
	}
	require.True(t, logged, "the 500 is logged with its request id")
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, "DELETE", "/api/v1/vouchers", "")
	requireAPIError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	resp, body = b.do(t, "PUT", "/api/v1/users", `{}`)
	requireAPIError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
	// An unknown path with any method is still 404 (no catch-all route).
	resp, body = b.do(t, "POST", "/api/v1/nothing-here", `{}`)
	requireAPIError(t, resp, body, http.StatusNotFound, "not_found")
}

// HEAD is served where gateway/openapi.yaml declares it (the catalog, the
// probes, the document, the page: what a CDN or a monitor revalidates) and
// is 405 elsewhere. Fiber gives every GET route a HEAD twin by itself, so a
// HEAD of the captcha made a captcha nobody could see, and a HEAD of the
// orders ran their query, neither declared (the spec had no head operation).
func TestHeadOnlyWhereDeclared(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/api/v1/vouchers", "/healthz", "/openapi.yaml", "/"} {
		resp, _ := b.do(t, http.MethodHead, path, "")
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	for path, allow := range map[string]string{
		"/api/v1/captcha": "GET", "/api/v1/orders": "GET", "/api/v1/orders/7": "GET",
		"/api/v1/vouchers/7/queue": "GET, POST", "/api/v1/ws": "GET",
	} {
		resp, _ := b.do(t, http.MethodHead, path, "", "Authorization", bearerOf(b.shopper))
		require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, path)
		require.Equal(t, allow, resp.Header.Get("Allow"), path)
	}
}

// An HTTP method Fiber does not know is answered by Fiber's router itself,
// before any middleware: it was 400 text/plain "Invalid http method",
// outside the API's error body (no JSON, no X-Request-Id). It is a method
// the path does not serve, like any other: 405 with Allow on a known path
// (gateway/openapi.yaml's MethodNotAllowed; it was 400 invalid_input, which
// the API fuzzer of `make conformance` reported), 404 elsewhere.
func TestUnknownMethodAnswersAPIError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, method := range []string{"FOO", "QUERY"} {
		resp, body := b.do(t, method, "/api/v1/vouchers", "")
		requireAPIError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"), method)
		resp, body = b.do(t, method, "/api/v1/orders/7/pay", "")
		requireAPIError(t, resp, body, http.StatusMethodNotAllowed, "method_not_allowed")
		require.Equal(t, "POST", resp.Header.Get("Allow"), method)
		resp, body = b.do(t, method, "/nothing-here", "")
		requireAPIError(t, resp, body, http.StatusNotFound, "not_found")
	}
	// Known methods still reach the routes.
	resp, _ := b.do(t, http.MethodGet, "/api/v1/vouchers", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestPanicBecomesInternal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.buyer.setFn(func(req seckill.BuyRequest) (seckill.ReserveResult, error) {
		if req.RequestKey == "panic" {
			var m map[string]int
			//lint:ignore SA5000 the nil map write is the point: a real bug, not a test double's panic call
			m["x"] = 1
		}
		return seckill.ReserveResult{OrderID: 9}, nil
	})
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", b.onSale.ID)
	resp, body := b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper), "Idempotency-Key", "panic")
	msg := requireAPIError(t, resp, body, 500, "internal")
	require.NotContains(t, msg, "map")
	require.Contains(t, b.logs.String(), "panic in handler")

	resp, _ = b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 202, resp.StatusCode, "the server keeps serving")
}
