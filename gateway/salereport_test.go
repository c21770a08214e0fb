package gateway

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
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

func (s *saleAttempts) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.list
	s.list = nil
	return l
}

// Every buy attempt of a known voucher is counted once for the sale report,
// by its answer's code and, for a 429, the limit that refused it; attempts
// for vouchers nobody made are not counted at all.
func TestBuyAttemptsCountForTheSaleReport(t *testing.T) {
	t.Parallel()
	r := &trail{}
	sales := &saleAttempts{}
	b := setup(t, func(_ *Config, d *Deps) { d.Buy = r.buySteps(); d.Sales = sales })
	v := b.catalog.put(seckill.Voucher{Title: "r", Kind: seckill.KindSeckill, StockTotal: 5, PerUserLimit: 1})
	path := fmt.Sprintf("/api/v1/vouchers/%d/orders", v.ID)
	buy := func(body string) int {
		resp, _ := b.do(t, "POST", path, body, "Authorization", bearerOf(b.shopper))
		return resp.StatusCode
	}

	require.Equal(t, 202, buy(""))
	require.Equal(t, []string{fmt.Sprintf("%d  ", v.ID)}, sales.take(), "accepted: no code")

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
	_, err := b.catalog.SetState(t.Context(), v.ID, seckill.StatePaused)
	require.NoError(t, err)
	require.Equal(t, 503, buy(""))
	require.Equal(t, []string{fmt.Sprintf("%d sale_paused ", v.ID)}, sales.take())

	// Made-up vouchers and unreadable bodies count nowhere.
	resp, _ := b.do(t, "POST", "/api/v1/vouchers/424242/orders", "", "Authorization", bearerOf(b.shopper))
	require.Equal(t, 404, resp.StatusCode)
	require.Equal(t, 400, buy(`{"quantity":"x"}`))
	require.Empty(t, sales.take())
}
