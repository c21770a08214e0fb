package gateway

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The seller's measures count only the buys that reached it: refusals
// before it (an unknown voucher) are in neither; a refusal of the sale's
// own (sold out) is timed but is no failure; a dependency down is both.
// The waiting rooms' adaptive rate is judged by these
// (seckill/waitroom/README.md), so a crowd's cheap refusals cannot move it.
func TestSellerMeasuresOnlyWhatReachesIt(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, func(_ *Config, d *testDeps) { d.Registerer = reg })
	buy := func(voucherID int64) int {
		resp, _ := b.do(t, http.MethodPost, fmt.Sprintf("/api/v1/vouchers/%d/orders", voucherID), `{"quantity":1}`,
			"Authorization", bearerOf(b.shopper), "Content-Type", "application/json")
		return resp.StatusCode
	}
	sells := func() (calls uint64, failed float64) {
		fams, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range fams {
			for _, m := range f.GetMetric() {
				if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "redis" {
					continue
				}
				switch f.GetName() {
				case MetricSellDuration:
					calls = m.GetHistogram().GetSampleCount()
				case MetricSellFailures:
					failed = m.GetCounter().GetValue()
				}
			}
		}
		return calls, failed
	}

	for range 5 {
		require.Equal(t, http.StatusNotFound, buy(987_654_321))
	}
	calls, failed := sells()
	require.Zero(t, calls, "a refusal before the seller is not a seller's call")
	require.Zero(t, failed)

	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, seckill.ErrSoldOut
	})
	require.Equal(t, http.StatusConflict, buy(b.onSale.ID))
	b.buyer.setFn(func(seckill.BuyRequest) (seckill.ReserveResult, error) {
		return seckill.ReserveResult{}, fmt.Errorf("redis: %w", apperr.ErrUnavailable)
	})
	require.Equal(t, http.StatusServiceUnavailable, buy(b.onSale.ID))
	calls, failed = sells()
	require.Equal(t, uint64(2), calls, "both reached the seller")
	require.Equal(t, 1.0, failed, "sold out is the sale's answer; unavailable is the back end's failure")
}
