package kafkaq_test

import (
	"os"
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

var stack *stacktest.Stack

func TestMain(m *testing.M) {
	// A worker process started by a test (see startWorker) runs only its
	// consumer, on the parent's services.
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(workerMain(spec))
	}
	stacktest.Main(m, &stack)
}
