package notify_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

// stack is the package's real services (only its redis-server is used here).
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }

// newRedis returns a client on the test server, closed when t ends. Each
// hub and publisher gets its own, as each gateway instance has its own.
func newRedis(t testing.TB) *redis.Client {
	t.Helper()
	return stack.Redis(t)
}
