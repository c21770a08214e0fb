package gateway

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The page's countdown needs the server's clock to the millisecond, on
// answers of every kind, errors included.
func TestServerTimeOnEveryAnswer(t *testing.T) {
	b := setup(t)
	for _, path := range []string{"/healthz", "/api/v1/vouchers", "/api/v1/no-such-route"} {
		before := time.Now().UnixMilli()
		resp, _ := b.do(t, http.MethodGet, path, "")
		after := time.Now().UnixMilli()
		ms, err := strconv.ParseInt(resp.Header.Get(HeaderServerTime), 10, 64)
		require.NoError(t, err, "%s: %s must be unix milliseconds", path, HeaderServerTime)
		require.GreaterOrEqual(t, ms, before, path)
		require.LessOrEqual(t, ms, after, path)
	}
}
