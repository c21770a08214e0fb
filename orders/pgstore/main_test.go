package pgstore_test

import (
	"testing"

	"github.com/flashsale/seckill/orders/internal/testenv"
)

var stack *testenv.Stack

func TestMain(m *testing.M) { testenv.Main(m, &stack) }
