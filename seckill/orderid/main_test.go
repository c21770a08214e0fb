package orderid

import (
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

// stack is the package's private services (only its redis-server is used).
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }
