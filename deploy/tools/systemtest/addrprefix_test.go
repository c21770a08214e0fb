package systemtest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIPv6LimitIsPerSlash56 sends logins from 256 addresses, one in each
// /64 of one /56 (what one subscriber is commonly given), through the real
// gateway and its Redis limit of credentials (10 at once, 20 a minute):
// they share one budget, so nearly all of them are refused. 20 addresses of
// 20 different /56s each have a budget of their own and none is refused.
func TestIPv6LimitIsPerSlash56(t *testing.T) {
	t.Parallel()
	ts := startSystem(t, map[string]string{
		"SECKILL_TRUSTED_PROXIES": "127.0.0.1", // the test client plays the load balancer
	})
	// A /48 of its own per run: the tests share one Redis and its limits.
	site := fmt.Sprintf("2001:db8:%x", rand.IntN(0xffff)+1)
	login := func(from string) int {
		a := ts.do(t, http.MethodPost, "/api/v1/sessions", "",
			map[string]string{"username": fmt.Sprintf("nobody-%x", rand.Int64()), "password": "not-the-password"},
			map[string]string{"X-Forwarded-For": from})
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests}, a.status, "from %s: %s", from, a.raw)
		return a.status
	}

	refused := 0
	for i := range 256 {
		if login(fmt.Sprintf("%s:%02x::1", site, i)) == http.StatusTooManyRequests { // ...:0000::1 to ...:00ff::1
			refused++
		}
	}
	// 10 of burst, and at 20 a minute a few more while the loop runs.
	require.GreaterOrEqual(t, refused, 256-10-20, "256 /64s of one /56 share one budget")

	for i := range 20 {
		from := fmt.Sprintf("%s:%x00::1", site, i+1) // ...:0100::1, ...:0200::1: another /56 each
		require.Equal(t, http.StatusUnauthorized, login(from), "the /56 of %s has its own budget", from)
	}
}
