package gateway

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// saleAttempts is a test's SaleRecorder: every attempt as "voucher code
// limiter".
type saleAttempts struct {
	mu   sync.Mutex
	list []string
}

func (s *saleAttempts) Attempt(voucherID int64, code, limiter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, fmt.Sprintf("%d %s %s", voucherID, code, limiter))
}

func (s *saleAttempts) Replayed(voucherID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, fmt.Sprintf("%d replayed", voucherID))
}

func (s *saleAttempts) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.list
	s.list = nil
	return l
}

// Every buy attempt of a known voucher is counted once for the sale report,
// by its answer's code and, for a 429, the limit that refused it, or as a
// replay; attempts for vouchers nobody made are not counted at all.
func TestBuyAttemptsCountForTheSaleReport(t *testing.T) {
	t.Parallel()
	r := &trail{}
	sales := &saleAttempts{}
	b := setup(t, func(_ *Config, d *testDeps) { d.Steps = r.buySteps(); d.Sales = sales })
	v := b.catalog.put(seckill.Voucher{Title: "r", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1})
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", v.ID)
	buy := func(body string) int {
		resp, _ := b.do(t, "POST", path, body, "Authorization", bearerOf(b.shopper))
		return resp.StatusCode
	}

	require.Equal(t, 202, buy(""))
	require.Equal(t, []string{fmt.Sprintf("%d  ", v.ID)}, sales.take(), "accepted: no code")

	// A retry the stock answers with the order its key made is a replay,
	// not a second accepted buy.
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{OrderID: 1_000_001, Replayed: true}, nil
	})
	resp, _ := b.do(t, "POST", path, "", "Authorization", bearerOf(b.shopper), HeaderIdempotencyKey, "k-1")
	require.Equal(t, 202, resp.StatusCode)
	require.Equal(t, []string{fmt.Sprintf("%d replayed", v.ID)}, sales.take())
	b.buyer.setFn(nil)

	for _, limit := range []string{"address", "user", "global"} {
		r.reset(map[string]error{fmt.Sprintf("%s(voucher=%d)", limit, v.ID): apperr.ErrRateLimited})
		require.Equal(t, 429, buy(""))
		require.Equal(t, []string{fmt.Sprintf("%d rate_limited %s_limit", v.ID, limit)}, sales.take())
	}
	r.reset(map[string]error{"fast(global_limit,redis)": seckill.ErrSoldOut})
	require.Equal(t, 409, buy(""))
	require.Equal(t, []string{fmt.Sprintf("%d sold_out ", v.ID)}, sales.take())
	r.reset(nil)

	// A refusal of the catalog step itself still names the voucher.
	_, err := b.catalog.SetState(t.Context(), v.ID, seckill.StatePaused, nil)
	require.NoError(t, err)
	require.Equal(t, 503, buy(""))
	require.Equal(t, []string{fmt.Sprintf("%d sale_paused ", v.ID)}, sales.take())

	// Made-up vouchers and unreadable bodies count nowhere.
	resp, _ = b.do(t, "POST", "/api/v1/vouchers/424242/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 404, resp.StatusCode)
	require.Equal(t, 400, buy(`{"quantity":"x"}`))
	require.Empty(t, sales.take())
}

// slowExport is a test's SaleReports: an export of rows lines written over
// a while, the report of no voucher.
type slowExport struct {
	rows  int
	pause time.Duration
}

func (s slowExport) Report(context.Context, int64) (api.SaleReport, error) {
	return api.SaleReport{}, apperr.ErrNotFound
}

func (s slowExport) WriteOrdersCSV(ctx context.Context, _ int64, w io.Writer) error {
	for i := range s.rows {
		if _, err := fmt.Fprintf(w, "%d,%s\n", i, strings.Repeat("x", 4000)); err != nil {
			return err
		}
		time.Sleep(s.pause)
	}
	return nil
}

// An export that takes longer than the server's WriteTimeout still
// arrives whole: the deadline moves on as long as it makes progress.
func TestOrdersExportOutlastsTheWriteTimeout(t *testing.T) {
	t.Parallel()
	export := slowExport{rows: 40, pause: 25 * time.Millisecond} // about 1 s
	b := setup(t, func(c *Config, d *testDeps) {
		c.WriteTimeout = 200 * time.Millisecond
		d.Reports = export
	})
	v := b.catalog.put(seckill.Voucher{Title: "e", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1})
	resp, body := b.do(t, "GET", fmt.Sprintf("/api/v1/admin/vouchers/%d/orders.csv", v.ID), "", "Authorization", bearerOf(testAdminToken))
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(t, export.rows, strings.Count(string(body), "\n"), "every row arrived")

	resp, _ = b.do(t, "GET", "/api/v1/admin/vouchers/424242/orders.csv", "", "Authorization", bearerOf(testAdminToken))
	require.Equal(t, 404, resp.StatusCode, "an unknown voucher, before any row")
	resp, _ = b.do(t, "GET", "/api/v1/admin/vouchers/424242/report", "", "Authorization", bearerOf(testAdminToken))
	require.Equal(t, 404, resp.StatusCode)
}
