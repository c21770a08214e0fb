package systemtest

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/edge"
)

// TestPowChallengeOverRealServices: on the real stack, twenty shoppers
// race with one solved challenge and exactly one buys (the others are 400
// challenge_invalid and hold nothing); one address asking for challenges
// past its free share (SECKILL_POW_ADDRESS_FREE) is given harder ones.
func TestPowChallengeOverRealServices(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{
		"SECKILL_TRUSTED_PROXIES": "127.0.0.1", "SECKILL_POW_BASE_BITS": "10", "SECKILL_POW_ADDRESS_FREE": "4",
		"SECKILL_POW_WINDOW": "1h",
	})
	vid := newVoucher(t, ts, "pow race", 50, 1, func(b map[string]any) { b["challenge"] = "pow" })
	from := map[string]string{"X-Forwarded-For": "10.77.0.1"}

	ch := ts.do(t, http.MethodGet, "/api/v1/challenges?voucher_id="+vid, "", nil, from)
	require.Equal(t, http.StatusOK, ch.status, "%s", ch.raw)
	require.EqualValues(t, 10, ch.body["difficulty_bits"])
	body := map[string]any{
		"challenge_id":     ch.body["challenge_id"],
		"challenge_answer": edge.Solve(ch.body["salt"].(string), 10),
	}
	var mu sync.Mutex
	codes := map[string]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := ts.do(t, http.MethodPost, "/api/v1/vouchers/"+vid+"/orders", ts.shopper(t, int64(7000+i)), body, fromAnywhere())
			code := a.errorCode()
			if a.status == http.StatusAccepted {
				code = "accepted"
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[string]int{"accepted": 1, "challenge_invalid": 19}, codes)
	ts.waitCatalogStock(t, vid, 49)

	// Asks 2 to 4 from the address are at the base; 5 to 8 one bit more.
	var bits []float64
	for range 7 {
		a := ts.do(t, http.MethodGet, "/api/v1/challenges?voucher_id="+vid, "", nil, from)
		require.Equal(t, http.StatusOK, a.status, "%s", a.raw)
		bits = append(bits, a.body["difficulty_bits"].(float64))
	}
	require.Equal(t, []float64{10, 10, 10, 11, 11, 11, 11}, bits)
}
