// Package systemtest runs the whole system over HTTP, on the package's real
// services, and drives its pages in Chromium.
//
// Which tests run in parallel, and how to write a new one: every test
// starts a system of its own (startSystem): a fresh PostgreSQL database, a
// topic and consumer group of its own on the package's Apache Kafka and,
// unless its env names a Redis, a redis-server of its own, so the breaker's
// ops switch, the fleet's count of gateways, the order events' channels and
// the rate limits are the test's alone. Most of a test's time is waiting (a
// pay timeout, a pass, a draw round, a long poll), so the tests that share
// nothing run side by side: they call t.Parallel() first thing, and TestMain
// lets parallelTests of them run at once (a -parallel flag given to go test
// wins). Go runs every serial test first, one at a time, and only then the
// parallel ones, so a serial test never shares the machine with them.
//
// A new test is parallel (t.Parallel() as its first line) when it touches
// only its own system, its own vouchers and users, and the package's
// services in ways that leave the others alone: drand rounds, stripe-mock,
// Jaeger (traces by their id), the Redis Cluster of onEveryShape (keys of
// its own vouchers), a Redis database number no other test uses. Metrics
// are per process, so reading /metrics deltas is no reason to be serial.
// A test stays serial, without t.Parallel() and with a comment saying why,
// when it:
//   - stops, kills, freezes or hooks a service every test uses: the Apache
//     Kafka nodes (TestTwoKafkaNodesDown), the in-process broker's request
//     hooks (stack.HoldProduce), the package's redis-server or Redis Cluster
//     (FLUSHALL, CLIENT PAUSE or KILL, the breaker's switch there);
//   - changes what the whole test process shares, as `seckill serve` and
//     `seckill dev` run by app.Run do: they set sarama's and go-redis's
//     package loggers, which every system of the process reads (go test
//     -race reports it);
//   - asserts how soon something happens (every instance within a second,
//     a push delay's p99, a cancellation within seconds of its deadline, a
//     step within a short pay timeout) or needs a rate limit not to refill
//     between two steps: the other tests' load on two cores would make it
//     flaky, not wrong;
//   - judges the system's own latency (the adaptive room follows the buy
//     route's p99).
//
// Whatever it is, keep its waits short through the system's configuration
// (SECKILL_PAY_TIMEOUT and the like), wait for a condition
// (require.Eventually, waitCatalogStock, waitStatus) rather than sleep, and
// give independent phases of one test parallel subtests (onEveryShape's
// shapes, TestRoomReturnedUnitsGoToTheLine's vouchers).
package systemtest

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/flashsale/seckill/deploy/devstack/stacktest"
)

// parallelTests is how many parallel tests run at once when go test is
// not told (-parallel): more than the two cores, since the tests mostly
// wait, and few enough that PostgreSQL's connections, the three Kafka
// brokers and the Chromium of the browser tests keep up.
const parallelTests = 4

var stack *stacktest.Stack

// TestMain sets the parallel tests' default before the services start and
// the tests run.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			fmt.Fprintf(os.Stderr, "systemtest: %v\n", err)
			os.Exit(2)
		}
	}
	stacktest.Main(m, &stack)
}
