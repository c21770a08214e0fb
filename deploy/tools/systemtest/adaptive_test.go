package systemtest

import (
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/app"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// An adaptive room follows the workers' lag, end to end: a gateway with the
// sweeper and no worker, so every buy stays in Kafka. Buys of another
// voucher pile up past SECKILL_ROOM_MAX_LAG (the sweeper reads the lag
// from the brokers and publishes it): the room's rate in force, as
// seckill_room_admit_rate shows it, falls to min_per_second, and a place in
// its line is quoted the wait at that rate. A worker starts and persists
// the backlog: the rate climbs back to max_per_second. The system runs on a
// Redis database of its own, so no other test's processes are in its
// fleet's health.
func TestAdaptiveRoomFollowsTheWorkersLag(t *testing.T) {
	t.Parallel()
	opts, err := redis.ParseURL(stack.RedisURL)
	require.NoError(t, err)
	ts := startSystem(t, map[string]string{
		"SECKILL_REDIS_URL":    fmt.Sprintf("redis://%s/%d", opts.Addr, 13),
		"SECKILL_ROLES":        "gateway,sweeper",
		"SECKILL_ROOM_MAX_LAG": "5",
	})
	now := time.Now()
	a := ts.do(t, http.MethodPost, "/api/v1/admin/vouchers", ts.cfg.AdminToken, map[string]any{
		"title": "adaptive room", "kind": "seckill", "price_cents": 250, "stock": 1, "per_user_limit": 1,
		"begin_at": now.Add(-time.Second).UTC().Format(time.RFC3339Nano), "end_at": now.Add(time.Hour).UTC().Format(time.RFC3339),
		"waiting_room": map[string]any{"admit_per_second": 20,
			"adaptive": map[string]any{"target_p99_ms": 10_000, "min_per_second": 10, "max_per_second": 20}},
	}, nil)
	require.Equal(t, http.StatusCreated, a.status, "create voucher: %s", a.raw)
	room := a.body["id"].(string)
	require.Equal(t, map[string]any{"target_p99_ms": 10_000.0, "min_per_second": 10.0, "max_per_second": 20.0},
		a.body["waiting_room"].(map[string]any)["adaptive"])

	// One unit: the first in line is admitted and keeps an unused pass,
	// so the others wait, their places fixed.
	const line = 40
	var last string
	for u := range int64(line) {
		last = ts.shopper(t, 9_400_001+u)
		q := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+room+"/queue", last, map[string]any{}, nil)
		require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	}
	rate := func() float64 {
		for _, m := range ts.scrape(t)[waitroom.MetricAdmitRate].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "voucher_id" && l.GetValue() == room {
					return m.GetGauge().GetValue()
				}
			}
		}
		return 0
	}
	// seen records each new rate read every 200 ms until done holds, and
	// logs when each came.
	seen := func(what string, done func(float64) bool) []float64 {
		var rates []float64
		var when []string
		start := time.Now()
		require.Eventually(t, func() bool {
			r := rate()
			if len(rates) == 0 || rates[len(rates)-1] != r {
				rates = append(rates, r)
				when = append(when, fmt.Sprintf("%g at %.1fs", r, time.Since(start).Seconds()))
			}
			return done(r)
		}, time.Minute, 200*time.Millisecond, "the rate in force went %v", rates)
		t.Logf("%s, seckill_room_admit_rate: %v", what, when)
		return rates
	}
	seen("before", func(r float64) bool { return r == 20 })

	// The workers are missing: 12 buys of another voucher wait in Kafka.
	other := ts.createVoucher(t, 50, 1, now.Add(-time.Second), now.Add(time.Hour))
	for u := range int64(12) {
		b := ts.buy(t, other, ts.shopper(t, 9_400_101+u), 1, "")
		require.Equal(t, http.StatusAccepted, b.status, "%s", b.raw)
	}
	fall := seen("workers missing", func(r float64) bool { return r == 10 })
	for i := 1; i < len(fall); i++ {
		require.Less(t, fall[i], fall[i-1], "only falls: %v", fall)
	}

	// The last in line is quoted the wait at the rate in force.
	q := ts.do(t, http.MethodGet, "/api/v1/vouchers/"+room+"/queue", last, nil, nil)
	require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	require.Equal(t, "waiting", q.body["state"], "%s", q.raw)
	pos := q.body["position"].(float64)
	require.Greater(t, pos, 20.0, "%s", q.raw)
	require.Equal(t, math.Ceil(pos/10), q.body["eta_seconds"], "position %v at 10 a second: %s", pos, q.raw)

	// A worker joins and persists the backlog: the rate climbs back.
	worker := ts.cfg
	worker.Roles, worker.HTTPAddr = []string{app.RoleWorker}, freeAddr(t)
	t.Cleanup(runInstance(t, worker))
	rise := seen("worker back", func(r float64) bool { return r == 20 })
	for i := 1; i < len(rise); i++ {
		require.Greater(t, rise[i], rise[i-1], "only climbs: %v", rise)
	}
	q = ts.do(t, http.MethodGet, "/api/v1/vouchers/"+room+"/queue", last, nil, nil)
	require.Equal(t, http.StatusOK, q.status, "%s", q.raw)
	require.Equal(t, math.Ceil(q.body["position"].(float64)/20), q.body["eta_seconds"], "at 20 a second again: %s", q.raw)
}
