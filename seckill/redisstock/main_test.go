package redisstock_test

import (
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

// stack is the package's private services: its redis-server, and the Redis
// Cluster of three masters that stack.RedisShapes starts on first use.
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }
