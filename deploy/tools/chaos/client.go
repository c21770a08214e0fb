package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// api is the suite's HTTP client of one system: the operator's routes and
// the shoppers' buys.
type api struct {
	base  string // http://127.0.0.1:port
	admin string
	http  *http.Client
}

// newAPI is a client of the gateway at addr; dial, when not nil, makes its
// connections (System.ShopperDial).
func newAPI(addr, adminToken string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *api {
	tr := &http.Transport{
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     30 * time.Second,
		DialContext:         dial,
	}
	// Longer than the gateway's own request timeout (10 s), so a slow answer
	// is the server's to give, not ours to invent.
	return &api{base: "http://" + addr, admin: adminToken, http: &http.Client{Transport: tr, Timeout: 15 * time.Second}}
}

// call sends one request and decodes a 2xx body into out. It returns the
// status (0 on a transport error) and the Retry-After header in seconds.
func (a *api) call(ctx context.Context, method, path, auth, key string, in, out any) (status, retryAfter int, err error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, 0, err
	}
	retryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, retryAfter, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, 0, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, 0, nil
}

// voucherOut is the part of the voucher answer the suite reads.
type voucherOut struct {
	ID string `json:"id"`
}

// createVoucher puts a seckill voucher on sale now, limit one per shopper.
func (a *api) createVoucher(ctx context.Context, title string, stock int64) (int64, error) {
	now := time.Now().UTC()
	in := map[string]any{
		"title": title, "kind": "seckill", "price_cents": 100, "stock": stock, "per_user_limit": 1,
		"begin_at": now.Add(-time.Second).Format(time.RFC3339),
		"end_at":   now.Add(2 * time.Hour).Format(time.RFC3339),
	}
	var out voucherOut
	if _, _, err := a.call(ctx, http.MethodPost, "/api/v1/admin/vouchers", a.admin, "", in, &out); err != nil {
		return 0, fmt.Errorf("chaos: create voucher: %w", err)
	}
	return strconv.ParseInt(out.ID, 10, 64)
}

// drift is the drift report of the admin stats route.
type drift struct {
	OK       bool     `json:"ok"`
	Pending  int64    `json:"pending"`
	InFlight int64    `json:"in_flight"`
	Problems []string `json:"problems"`
}

// clean is a report with nothing to repair and nothing in flight.
func (d drift) clean() bool { return d.OK && d.Pending == 0 && d.InFlight == 0 }

type statsOut struct {
	Drift *drift `json:"drift"`
}

// drift reads the voucher's drift report.
func (a *api) drift(ctx context.Context, voucherID int64) (drift, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out statsOut
	if _, _, err := a.call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/admin/vouchers/%d/stats", voucherID), a.admin, "", nil, &out); err != nil {
		return drift{}, err
	}
	if out.Drift == nil {
		return drift{}, fmt.Errorf("chaos: stats of voucher %d carry no drift report", voucherID)
	}
	return *out.Drift, nil
}

// orderStatus asks the API what became of one order, as its shopper.
func (a *api) orderStatus(ctx context.Context, token string, orderID int64) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out struct {
		Status string `json:"status"`
	}
	status, _, err := a.call(ctx, http.MethodGet, "/api/v1/orders/"+strconv.FormatInt(orderID, 10), token, "", nil, &out)
	switch {
	case err == nil:
		return out.Status
	case status == 0:
		return "no answer"
	}
	return "HTTP " + strconv.Itoa(status)
}
