package eligibility_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
)

// redisURL is the package's private redis-server, shared by its tests:
// each uses voucher ids no other test uses.
var redisURL string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "seckill-eligibility-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := devstack.StartRedis(ctx, devstack.RedisOptions{Dir: dir})
	if err != nil {
		fmt.Fprintf(os.Stderr, "eligibility tests need redis-server (apt-get install redis-server): %v\n", err)
		return 1
	}
	defer func() { _ = r.Stop(context.Background()) }()
	redisURL = r.URL
	return m.Run()
}
