package systemtest

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// An adaptive room listens to the back end, not to the crowd. One account
// sends 200 buys of made-up vouchers (each a 404 that waits for the
// catalog's look-up of the record) and 200 buys of a voucher whose sale has
// not started (409, refused at once from memory): none of them reaches the
// seller, so the room's rate in force
// stays at its maximum, where a healthy back end puts it, although the buy
// route's answers were slow. Then Redis itself is slowed (CLIENT PAUSE on
// every write, the reservation script's included) while honest shoppers
// buy: the reservations are slow, and the rate falls. The system runs on a
// Redis of its own, so the pauses disturb no other test and no other
// test's processes are in its fleet's health.
func TestAdaptiveRoomListensToTheBackEndNotTheCrowd(t *testing.T) {
	// This test is serial (main_test.go): the rate follows the buy route's p99, which other tests' load would move.
	srv, rdb := stacktest.PrivateRedis(t)
	ts := startSystem(t, map[string]string{"SECKILL_REDIS_URL": "redis://" + srv.Addr + "/0"})
	now := time.Now()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "adaptive room", "kind": "seckill", "price_cents": 250, "stock": 1, "per_user_limit": 1,
		"begin_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 20,
			"adaptive": map[string]any{"target_p99_ms": 100, "min_per_second": 5, "max_per_second": 20}},
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	room := a.body["id"].(string)
	// The room is being admitted once someone is in its line.
	q := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+room+"/queue", ts.shopper(t, 9_500_001), map[string]any{}, nil)
	require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	other := ts.createVoucher(t, 10_000, 1, now.Add(-time.Second), now.Add(time.Hour))
	later := ts.createVoucher(t, 10, 1, now.Add(time.Hour), now.Add(2*time.Hour))

	rate := func() float64 {
		for _, m := range ts.scrape(t)[waitroom.MetricAdmitRate].GetMetric() {
			if labelOf(m, "voucher_id") == room {
				return m.GetGauge().GetValue()
			}
		}
		return 0
	}
	require.Eventually(t, func() bool { return rate() == 20 }, 30*time.Second, 100*time.Millisecond,
		"the room starts at 20 a second")
	slowBefore := slowBuyAnswers(t, ts)

	// The crowd: 200 slow 404s and 200 instant 409s, all from one account,
	// while the rate is read every 100 ms. The 404s come in waves of ten,
	// each sent as the one before is answered: a wave waits for the
	// catalog's next look-up of the record, up to 250 ms after the last.
	bot := ts.shopper(t, 9_500_002)
	codes := make(chan string, 400)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := range 20 {
			for j := range 10 {
				wg.Add(2)
				go func() {
					defer wg.Done()
					codes <- ts.buy(t, strconv.Itoa(2_000_000_000+10*i+j), bot, 1, "").errorCode()
				}()
				go func() {
					defer wg.Done()
					codes <- ts.buy(t, later, bot, 1, "").errorCode()
				}()
			}
			wg.Wait()
		}
	}()
	var rates []float64
	watch := func(until <-chan struct{}, d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			select {
			case <-until:
				return
			default:
			}
			rates = append(rates, rate())
			_ = pause.For(t.Context(), 100*time.Millisecond)
		}
	}
	watch(done, time.Minute)
	<-done
	close(codes)
	seen := map[string]int{}
	for c := range codes {
		seen[c]++
	}
	require.Equal(t, 200, seen["not_found"], "every made-up voucher is a 404: %v", seen)
	require.Equal(t, 200, seen["not_started"], "the sale that has not started refuses at once: %v", seen)
	slow := slowBuyAnswers(t, ts) - slowBefore
	require.GreaterOrEqual(t, slow, uint64(20),
		"the 404s waited for the record's look-up, so the buy route's p99 was above the target")
	// The sample of the flood's window and the one after it are judged.
	watch(nil, 3*time.Second)
	for _, r := range rates {
		require.Equal(t, 20.0, r, "cheap refusals never move the rate: %v", rates)
	}

	// A slow back end: every write to Redis waits up to 300 ms while
	// honest shoppers buy. The reservations are slow, and the rate falls.
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var slowed sync.WaitGroup
	slowed.Add(1)
	go func() {
		defer slowed.Done()
		for ctx.Err() == nil {
			_ = rdb.Do(ctx, "CLIENT", "PAUSE", "300", "WRITE").Err()
			_ = pause.For(ctx, 320*time.Millisecond)
		}
	}()
	buyer := int64(9_510_000)
	require.Eventually(t, func() bool {
		var w sync.WaitGroup
		for range 4 {
			buyer++
			w.Add(1)
			go func(tok string) {
				defer w.Done()
				ts.buy(t, other, tok, 1, "")
			}(ts.shopper(t, buyer))
		}
		w.Wait()
		return rate() < 20
	}, time.Minute, 50*time.Millisecond, "a slow Redis lowers the rate")
	stop()
	slowed.Wait()
	_ = rdb.Do(context.Background(), "CLIENT", "UNPAUSE").Err()
	t.Logf("%d buy answers over 100 ms in the crowd; rate during it: %v; lowered by the slow back end to %g after %d buys", slow, rates, rate(), buyer-9_510_000)
}

// slowBuyAnswers is how many answers of the buy route took more than
// 100 ms, by the gateway's own histogram.
func slowBuyAnswers(t *testing.T, ts *testSystem) uint64 {
	t.Helper()
	var total, fast uint64
	for _, m := range ts.scrape(t)["seckill_http_request_duration_seconds"].GetMetric() {
		if labelOf(m, "route") != "/api/v1/vouchers/:id/orders" {
			continue
		}
		h := m.GetHistogram()
		total += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == 0.1 {
				fast += b.GetCumulativeCount()
			}
		}
	}
	return total - fast
}

// labelOf is the value of m's label name ("" when it has none).
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
