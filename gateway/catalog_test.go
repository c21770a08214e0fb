package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pipe "github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
)

// TestCatalogETagAndCacheControl: the catalog routes carry a strong ETag and
// a Cache-Control a CDN may keep; If-None-Match answers 304 without a body;
// a change of one voucher changes both tags.
func TestCatalogETagAndCacheControl(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.onSale.ID
	one := fmt.Sprintf("/api/v1/vouchers/%d", id)
	for _, path := range []string{"/api/v1/vouchers", one} {
		resp, body := b.do(t, "GET", path, "")
		require.Equal(t, 200, resp.StatusCode, "%s", body)
		require.Equal(t, CatalogCacheControl, resp.Header.Get("Cache-Control"))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		tag := resp.Header.Get("ETag")
		require.Regexp(t, `^"[A-Za-z0-9_-]+"$`, tag, "a strong tag")
		require.Contains(t, string(body), `"state":"on_sale"`)

		resp, body = b.do(t, "GET", path, "", "If-None-Match", `"other", W/`+tag)
		require.Equal(t, 304, resp.StatusCode)
		require.Empty(t, body)
		require.Equal(t, tag, resp.Header.Get("ETag"))
		require.Equal(t, CatalogCacheControl, resp.Header.Get("Cache-Control"))

		b.catalog.update(id, func(v *seckill.Voucher) { v.StockLeft-- })
		resp, body = b.do(t, "GET", path, "", "If-None-Match", tag)
		require.Equal(t, 200, resp.StatusCode, "a changed catalog is sent again")
		require.NotEqual(t, tag, resp.Header.Get("ETag"))
		require.NotEmpty(t, body)
	}
	resp, body := b.do(t, "GET", "/api/v1/vouchers/999999", "")
	requireAPIError(t, resp, body, 404, "not_found")
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"), "an error is not for a CDN to keep")
}

// TestCatalogEncodesOncePerChange: however many requests read the catalog,
// a voucher is encoded once per change, and a change of one voucher
// re-encodes that voucher only.
func TestCatalogEncodesOncePerChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 9 {
		b.catalog.put(seckill.Voucher{Title: fmt.Sprint("v", i), Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1})
	}
	var wg sync.WaitGroup
	read := func() {
		for range 20 {
			wg.Go(func() {
				resp, _ := b.do(t, "GET", "/api/v1/vouchers", "")
				require.Equal(t, 200, resp.StatusCode)
				resp, _ = b.do(t, "GET", fmt.Sprintf("/api/v1/vouchers/%d", b.onSale.ID), "")
				require.Equal(t, 200, resp.StatusCode)
			})
		}
		wg.Wait()
	}
	read()
	require.Equal(t, int64(10), b.srv.catalogCache.encodings.Load(), "ten vouchers, each encoded once")
	b.catalog.update(b.onSale.ID, func(v *seckill.Voucher) { v.StockLeft = 0 })
	read()
	require.Equal(t, int64(11), b.srv.catalogCache.encodings.Load(), "one change, one encoding")
}

// TestCatalogGateRefusesBeforeAnyLimiter: an unknown, paused, not yet on
// sale, ended or sold-out voucher is answered from the catalog before any
// gate is charged; a keyed attempt on an ended or sold-out voucher goes on
// (it may be a replay the script answers).
func TestCatalogGateRefusesBeforeAnyLimiter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	charged := 0
	limiter := limitFunc(func(context.Context, *pipe.Attempt) error {
		mu.Lock()
		charged++
		mu.Unlock()
		return nil
	})
	b := setup(t, func(_ *Config, d *testDeps) { d.Steps = pipe.Steps{Global: limiter, User: limiter} })
	now := time.Now()
	paused := b.catalog.put(seckill.Voucher{Title: "p", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1, Paused: true})
	later := b.catalog.put(seckill.Voucher{Title: "l", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1, BeginAt: now.Add(time.Hour), EndAt: now.Add(2 * time.Hour)})
	ended := b.catalog.put(seckill.Voucher{Title: "e", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1, BeginAt: now.Add(-2 * time.Hour), EndAt: now.Add(-time.Hour)})
	gone := b.catalog.put(seckill.Voucher{Title: "g", Kind: seckill.KindSeckill, StockTotal: 5, StockLeft: -1, PerUserLimit: 1})
	auth := []string{"Authorization", bearerOf(b.shopper)}
	buy := func(id int64, headers ...string) (*http.Response, []byte) {
		return b.do(t, "POST", fmt.Sprintf("/api/v1/vouchers/%d/orders", id), "", append(headers, auth...)...)
	}
	for _, c := range []struct {
		id     int64
		status int
		code   string
	}{
		{424242, 404, "not_found"}, {paused.ID, 503, "sale_paused"}, {later.ID, 409, "not_started"},
		{ended.ID, 409, "ended"}, {gone.ID, 409, "sold_out"},
	} {
		resp, body := buy(c.id)
		requireAPIError(t, resp, body, c.status, c.code)
		if c.status == 503 {
			require.Equal(t, "5", resp.Header.Get("Retry-After"), "a paused sale says when to look again")
		}
	}
	mu.Lock()
	require.Zero(t, charged, "no limiter charged for a certainly useless attempt")
	mu.Unlock()

	resp, _ := buy(gone.ID, "Idempotency-Key", "k1")
	require.Equal(t, 202, resp.StatusCode, "a keyed attempt reaches the reservation (the fake buyer accepts it)")
	resp, _ = buy(paused.ID, "Idempotency-Key", "k1")
	require.Equal(t, 503, resp.StatusCode, "a pause refuses keyed attempts too: they retry after it")

	// The operator's switch: the next buy obeys.
	resp, body := b.do(t, "PUT", fmt.Sprintf("/api/v1/admin/vouchers/%d/state", paused.ID), `{"state":"on_sale"}`, "Authorization", "Bearer "+testAdminToken)
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"state":"on_sale"`)
	resp, _ = buy(paused.ID)
	require.Equal(t, 202, resp.StatusCode)
	for _, in := range []string{`{"state":"sold_out"}`, `{}`, `{"state":"paused","x":1}`} {
		resp, body = b.do(t, "PUT", fmt.Sprintf("/api/v1/admin/vouchers/%d/state", paused.ID), in, "Authorization", "Bearer "+testAdminToken)
		requireAPIError(t, resp, body, 400, "invalid_input")
	}
	resp, body = b.do(t, "PUT", "/api/v1/admin/vouchers/999999/state", `{"state":"paused"}`, "Authorization", "Bearer "+testAdminToken)
	requireAPIError(t, resp, body, 404, "not_found")
	resp, body = b.do(t, "PUT", fmt.Sprintf("/api/v1/admin/vouchers/%d/state", paused.ID), `{"state":"paused"}`, auth...)
	requireAPIError(t, resp, body, 403, "forbidden")
}

// TestVoucherYearsOutOfRange: a window whose year, once in UTC, is outside
// 2000-9999 is the operator's 400 invalid_input (JSON cannot write year
// 10000), never a 500.
func TestVoucherYearsOutOfRange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, window := range [][2]string{
		{"9999-12-31T20:00:00-05:00", "9999-12-31T23:00:00-05:00"}, // 10000-01-01 in UTC
		{"1999-12-31T23:00:00Z", "2000-01-02T00:00:00Z"},
		{"2000-01-01T00:30:00+01:00", "2000-01-02T00:00:00Z"}, // 1999-12-31 in UTC
	} {
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			fmt.Sprintf(`{"title":"t","kind":"seckill","price_cents":1,"stock":1,"per_user_limit":1,"begin_at":%q,"end_at":%q}`, window[0], window[1]),
			"Authorization", "Bearer "+testAdminToken)
		msg := requireAPIError(t, resp, body, 400, "invalid_input")
		require.Contains(t, msg, "2000 to 9999", window[0])
	}
}

// TestVoucherShardsAndWaitingRoom: a voucher created with shards and a
// waiting room shows both in the catalog, on the list and alone; a voucher
// without them shows one bucket and a null room; a room on a limit voucher
// is refused with the reason.
func TestVoucherShardsAndWaitingRoom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := []string{"Authorization", bearerOf(testAdminToken)}
	create := func(extra string) (int, map[string]any) {
		t.Helper()
		resp, body := b.do(t, "POST", "/api/v1/admin/vouchers",
			`{"title":"Hot drop","kind":"seckill","price_cents":100,"stock":80,"per_user_limit":1,`+
				`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z"`+extra+`}`, admin...)
		var out map[string]any
		require.NoError(t, json.Unmarshal(body, &out), "%s", body)
		return resp.StatusCode, out
	}

	status, hot := create(`,"shards":8,"waiting_room":{"admit_per_second":250,"prequeue_seconds":600}`)
	require.Equal(t, 201, status, "%v", hot)
	require.EqualValues(t, 8, hot["shards"])
	require.Equal(t, map[string]any{"admit_per_second": 250.0, "prequeue_seconds": 600.0, "mode": "line"}, hot["waiting_room"])

	status, plain := create(`,"waiting_room":{"admit_per_second":5}`)
	require.Equal(t, 201, status, "%v", plain)
	require.EqualValues(t, 1, plain["shards"], "shards default to one bucket")
	require.Equal(t, map[string]any{"admit_per_second": 5.0, "prequeue_seconds": 0.0, "mode": "line"}, plain["waiting_room"], "no pre-queue by default")

	status, none := create(``)
	require.Equal(t, 201, status, "%v", none)
	require.Contains(t, none, "waiting_room")
	require.Nil(t, none["waiting_room"])

	resp, body := b.do(t, "GET", "/api/v1/vouchers/"+hot["id"].(string), "")
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	var one map[string]any
	require.NoError(t, json.Unmarshal(body, &one))
	require.Equal(t, hot["shards"], one["shards"])
	require.Equal(t, hot["waiting_room"], one["waiting_room"])

	resp, body = b.do(t, "POST", "/api/v1/admin/vouchers",
		`{"title":"Queue for a limit","kind":"limit","price_cents":100,"stock":80,"per_user_limit":1,`+
			`"begin_at":"2030-01-01T00:00:00Z","end_at":"2030-01-02T00:00:00Z","waiting_room":{"admit_per_second":5}}`, admin...)
	require.Equal(t, 400, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "waiting_room is for seckill vouchers only")

	// A draw: its pass lives 600 s unless set, it needs an entry window,
	// and the voucher shows its draw (nothing published yet).
	status, drawn := create(`,"waiting_room":{"admit_per_second":5,"prequeue_seconds":60,"mode":"draw"}`)
	require.Equal(t, 201, status, "%v", drawn)
	require.Equal(t, map[string]any{"admit_per_second": 5.0, "prequeue_seconds": 60.0, "mode": "draw",
		"draw_pass_seconds": 600.0}, drawn["waiting_room"])
	require.Equal(t, map[string]any{"commitment": nil, "seed": nil, "entries": 0.0, "cutoff": nil, "beacon": nil,
		"entries_hash": nil, "commitments": []any{}, "void": false, "void_reason": nil}, drawn["draw"])
	for _, bad := range []string{
		`{"admit_per_second":5,"mode":"draw"}`,
		`{"admit_per_second":5,"prequeue_seconds":60,"mode":"lottery"}`,
		`{"admit_per_second":5,"prequeue_seconds":60,"mode":"draw","draw_pass_seconds":-1}`,
	} {
		status, out := create(`,"waiting_room":` + bad)
		require.Equal(t, 400, status, "%s: %v", bad, out)
	}
}
