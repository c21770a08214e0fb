package remind_test

import (
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

// stack is the package's real services: PostgreSQL for the contacts,
// Redis for the waiting rooms, mailpit as the SMTP server.
var stack *stacktest.Stack

func TestMain(m *testing.M) { stacktest.Main(m, &stack) }
