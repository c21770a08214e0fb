package salereport_test

import (
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }
