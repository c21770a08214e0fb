package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
)

// The wire shapes of gateway/openapi.yaml, as far as the tool reads them. Ids stay strings:
// the tool only compares them.
type (
	apiVoucher struct {
		ID           string    `json:"id"`
		Title        string    `json:"title"`
		Kind         string    `json:"kind"`
		PriceCents   int64     `json:"price_cents"`
		StockTotal   int64     `json:"stock_total"`
		StockLeft    int64     `json:"stock_left"`
		PerUserLimit int64     `json:"per_user_limit"`
		BeginAt      time.Time `json:"begin_at"`
		EndAt        time.Time `json:"end_at"`
	}
	newVoucher struct {
		Title           string    `json:"title"`
		Kind            string    `json:"kind"`
		PriceCents      int64     `json:"price_cents"`
		Stock           int64     `json:"stock"`
		PerUserLimit    int64     `json:"per_user_limit"`
		BeginAt         time.Time `json:"begin_at"`
		EndAt           time.Time `json:"end_at"`
		CaptchaRequired bool      `json:"captcha_required"`
		Shards          int       `json:"shards,omitempty"`
		WaitingRoom     *roomSpec `json:"waiting_room,omitempty"`
	}
	// roomSpec is a voucher's waiting_room.
	roomSpec struct {
		AdmitPerSecond  int64 `json:"admit_per_second"`
		PrequeueSeconds int64 `json:"prequeue_seconds"`
	}
	apiOrder struct {
		OrderID     string  `json:"order_id"`
		VoucherID   string  `json:"voucher_id"`
		UserID      string  `json:"user_id"`
		Quantity    int64   `json:"quantity"`
		AmountCents int64   `json:"amount_cents"`
		Status      string  `json:"status"`
		CreatedAt   optTime `json:"created_at"`
		PayDeadline optTime `json:"pay_deadline"`
	}
	apiStats struct {
		VoucherID  string `json:"voucher_id"`
		StockTotal int64  `json:"stock_total"`
		StockLeft  int64  `json:"stock_left"`
		Reserved   int64  `json:"reserved"`
		Created    int64  `json:"created"`
		Paid       int64  `json:"paid"`
		Cancelled  int64  `json:"cancelled"`
		Failed     int64  `json:"failed"`
	}
	apiErrorBody struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// optTime is a time that may be null or "" on the wire (a reserved order
// has no pay deadline yet).
type optTime struct{ time.Time }

func (t *optTime) UnmarshalJSON(b []byte) error {
	if s := string(b); s == "null" || s == `""` {
		t.Time = time.Time{}
		return nil
	}
	return json.Unmarshal(b, &t.Time)
}

func (t optTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.Time)
}

// apiError is a non-2xx answer. It unwraps to the platform's sentinel for
// its code, so callers can errors.Is it like any other error of the project.
type apiError struct {
	Op      string
	Status  int
	Code    string
	Message string
	// RetryAfter is the answer's Retry-After, which every 429 and 503
	// carries (gateway/openapi.yaml); 0 when absent or unreadable.
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

func (e *apiError) Unwrap() error {
	switch e.Code {
	case "invalid_input":
		return apperr.ErrInvalidInput
	case "unauthenticated":
		return apperr.ErrUnauthenticated
	case "forbidden":
		return apperr.ErrForbidden
	case "not_found":
		return apperr.ErrNotFound
	case "sold_out":
		return seckill.ErrSoldOut
	case "limit_exceeded":
		return seckill.ErrLimitExceeded
	case "not_started":
		return seckill.ErrNotStarted
	case "ended":
		return seckill.ErrEnded
	case "conflict":
		return apperr.ErrConflict
	case "rate_limited":
		return apperr.ErrRateLimited
	case "unavailable":
		return apperr.ErrUnavailable
	}
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusBadGateway || e.Status == http.StatusGatewayTimeout {
		return apperr.ErrUnavailable
	}
	return nil
}

// maxBody bounds what the tool reads of any answer; the API's answers are small
// except the order lists, which stay well under this.
const maxBody = 8 << 20

// apiClient speaks the HTTP contract (gateway/openapi.yaml) over one http.Client.
type apiClient struct {
	base   string
	admin  string
	http   *http.Client
	secret []byte
	// waits counts the 429 and 503 answers read waited out.
	waits atomic.Int64
}

func (c *apiClient) adminAuth() string { return "Bearer " + c.admin }

// do sends one request and decodes a 2xx answer into out (when not nil).
func (c *apiClient) do(ctx context.Context, op, method, path, auth string, in, out any) error {
	return c.doFrom(ctx, op, method, path, auth, "", in, out)
}

// doFrom is do for a shopper standing for the client address from, sent in
// X-Forwarded-For ("" sends none: the tool's own address).
func (c *apiClient) doFrom(ctx context.Context, op, method, path, auth, from string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if from != "" {
		req.Header.Set(headerForwardedFor, from)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", op, apperr.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w: %w", op, apperr.ErrUnavailable, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := decodeAPIError(op, resp.StatusCode, b)
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: HTTP %d with a body that is not the documented JSON: %w", op, resp.StatusCode, err)
	}
	return nil
}

func decodeAPIError(op string, status int, body []byte) *apiError {
	e := &apiError{Op: op, Status: status}
	var eb apiErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		e.Code = "undocumented"
		e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
	}
	return e
}

func (c *apiClient) createVoucher(ctx context.Context, v newVoucher) (apiVoucher, error) {
	var out apiVoucher
	err := c.do(ctx, "create voucher", http.MethodPost, "/api/v1/admin/vouchers", c.adminAuth(), v, &out)
	if err == nil && out.ID == "" {
		err = errors.New("create voucher: the answer has no id")
	}
	return out, err
}

// The read-back's bounds on waiting out a refusal: at most readRetries more
// tries, each after the answer's Retry-After capped at readPauseMax (or
// readPauseDefault when it gives none), so that a system that keeps
// refusing still ends the run, with the refusal as the read's answer.
const (
	readRetries      = 8
	readPauseMax     = 5 * time.Second
	readPauseDefault = time.Second
)

// read is a GET of the tool's read-back (the polling and the checks), sent
// as auth and from (doFrom). A 429 or 503 is waited out as its Retry-After
// says, a bounded number of times, as a client of the contract does: the
// instrument's own reads meeting a limiter are no broken invariant. The
// crowd's buys are never retried here; their answers are what is measured.
func (c *apiClient) read(ctx context.Context, op, path, auth, from string, out any) error {
	for try := 0; ; try++ {
		err := c.doFrom(ctx, op, http.MethodGet, path, auth, from, nil, out)
		var e *apiError
		if try == readRetries || !errors.As(err, &e) ||
			(e.Status != http.StatusTooManyRequests && e.Status != http.StatusServiceUnavailable) {
			return err
		}
		c.waits.Add(1)
		wait := readPauseDefault
		if e.RetryAfter > 0 {
			wait = min(e.RetryAfter, readPauseMax)
		}
		if pauseErr := pause.For(ctx, wait); pauseErr != nil {
			return err
		}
	}
}

// retryAfter reads a Retry-After header: seconds, as the contract sends it,
// or an HTTP date, which the header may also be; 0 when it is neither.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0)
	}
	return 0
}

func (c *apiClient) voucher(ctx context.Context, id string) (apiVoucher, error) {
	var out apiVoucher
	err := c.read(ctx, "get voucher", "/api/v1/vouchers/"+url.PathEscape(id), "", "", &out)
	return out, err
}

func (c *apiClient) stats(ctx context.Context, id string) (apiStats, error) {
	var out apiStats
	err := c.read(ctx, "voucher stats", "/api/v1/admin/vouchers/"+url.PathEscape(id)+"/stats", c.adminAuth(), "", &out)
	return out, err
}

// order reads one order as its shopper s would.
func (c *apiClient) order(ctx context.Context, s shopper, id string) (apiOrder, error) {
	var out apiOrder
	err := c.read(ctx, "get order", "/api/v1/orders/"+url.PathEscape(id), s.auth, s.addr, &out)
	return out, err
}

// orders lists the orders of shopper s, as s would.
func (c *apiClient) orders(ctx context.Context, s shopper) ([]apiOrder, error) {
	var out []apiOrder
	err := c.read(ctx, "list orders", "/api/v1/orders", s.auth, s.addr, &out)
	return out, err
}

// headerForwardedFor names the client a request stands for; the gateway
// believes it only from a proxy it trusts (SECKILL_TRUSTED_PROXIES, and
// loopback in dev mode: CONFIG.md).
const headerForwardedFor = "X-Forwarded-For"

// shopperAddr is the client address the shopper with user id uid stands
// for in X-Forwarded-For, so that the per-address limits meet a crowd of
// clients rather than the tool's one address. It is in 10.0.0.0/8, a
// private range, so that it names nobody's real address, and the same for
// a user id in every run, as a returning shopper's would be; consecutive
// ids (the crowd's) get distinct addresses, never the range's first or
// last.
func shopperAddr(uid int64) string {
	const hosts = 1<<24 - 2
	n := uint32(uint64(uid)%hosts) + 1
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}).String()
}

// mintToken signs a shopper token the way gateway/openapi.yaml describes: HS256, sub the
// decimal user id, exp required.
func mintToken(secret []byte, userID int64, exp time.Time) (string, error) {
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
	})
	s, err := tok.SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("mint token for user %d: %w", userID, err)
	}
	return s, nil
}

// newTransport keeps one idle connection per worker, so the crowd does not
// pay for TCP handshakes at the opening second. No proxy: a load test that
// silently goes through a proxy from the environment measures the proxy.
func newTransport(conns int) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		MaxIdleConns:          conns + 16,
		MaxIdleConnsPerHost:   conns + 16,
		IdleConnTimeout:       2 * time.Minute,
		DisableCompression:    true,
		ResponseHeaderTimeout: 0,
		ForceAttemptHTTP2:     false,
	}
}

// shortError names a transport failure without the URL, so failures of the
// same kind group together in the report.
func shortError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "transport: timeout"
	case errors.Is(err, context.Canceled):
		return "transport: cancelled"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return "transport: " + oe.Op + ": " + unwrapAll(oe.Err).Error()
	}
	return "transport: " + err.Error()
}

func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
