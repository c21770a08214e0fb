package devstack_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
)

// TestDrand starts a private network and waits for its first round: the
// chain's hash is served, then a round.
func TestDrand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := devstack.StartDrand(ctx, devstack.DrandOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop(context.Background())
	h, err := d.ChainHash(ctx)
	if err != nil || len(h) != 64 {
		t.Fatalf("chain hash %q: %v", h, err)
	}
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}
