package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/cmd/seckill/loadtest"
)

// TestLoadtestAgainstTheRealSystem runs the load tool, as `seckill loadtest`
// does, against the whole system on real Redis, PostgreSQL and Kafka, twice:
// a crowd with quantities of 1 and 2, a per-user limit and replayed
// Idempotency-Keys that the stock covers, then a crowd that sells the
// voucher out. Every invariant check must pass both times. (That the checks
// catch a dishonest system is proven against a gateway double in
// cmd/seckill/loadtest.)
func TestLoadtestAgainstTheRealSystem(t *testing.T) {
	ts := startSystem(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := loadtest.DefaultConfig()
	cfg.BaseURL = ts.base
	cfg.AdminToken, cfg.JWTSecret = ts.cfg.AdminToken, ts.cfg.JWTSecret
	cfg.Concurrency = 16
	cfg.OpenIn = time.Second
	cfg.PersistWait = 30 * time.Second
	cfg.NoProgress = true
	cfg.JSON = true

	t.Run("limits and replays", func(t *testing.T) {
		cfg := cfg
		cfg.FirstUserID = 31_000_000
		cfg.Shoppers, cfg.Attempts = 150, 3
		cfg.Stock, cfg.PerUserLimit = 1000, 2
		cfg.Quantities = loadtest.QuantityMix{{Quantity: 1, Weight: 70}, {Quantity: 2, Weight: 30}}
		cfg.ReplayShare = 0.3
		cfg.Seed = 6
		rep := sellWith(t, ctx, cfg)
		require.Positive(t, rep.ReplaysSent)
		require.Positive(t, rep.Outcomes[loadtest.OutcomeLimitExceeded], "3 attempts of up to 2 units against a limit of 2")
		require.Nil(t, rep.SoldOutAfterMS)
	})

	t.Run("sells out", func(t *testing.T) {
		cfg := cfg
		cfg.FirstUserID = 32_000_000
		cfg.Shoppers, cfg.Attempts = 200, 2
		cfg.Stock, cfg.PerUserLimit = 60, 1
		cfg.ReplayShare = 0
		cfg.Seed = 7
		rep := sellWith(t, ctx, cfg)
		require.Equal(t, cfg.Stock, rep.Sold)
		require.NotNil(t, rep.SoldOutAfterMS)
		require.Positive(t, rep.Outcomes[loadtest.OutcomeSoldOut])
	})

	// The ceiling mode that make bench compares the sale with: the same
	// client shape on a trivial route of the same app.
	t.Run("ceiling", func(t *testing.T) {
		cfg := cfg
		cfg.Ceiling, cfg.Concurrency, cfg.Duration = "/healthz", 4, 300*time.Millisecond
		var stdout bytes.Buffer
		cr, err := loadtest.RunCeiling(ctx, cfg, &stdout)
		require.NoError(t, err)
		require.GreaterOrEqual(t, cr.Requests, cfg.Concurrency, "every worker makes at least one request")
		require.Zero(t, cr.Errors)
		require.Positive(t, cr.RequestsPerSecond)
		require.Contains(t, stdout.String(), `"requests_per_second"`)
	})
}

// sellWith runs one sale and requires every check to pass, every
// request to be answered, and every accepted order to be persisted.
func sellWith(t *testing.T, ctx context.Context, cfg loadtest.Config) loadtest.Report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	rep, err := loadtest.Run(ctx, cfg, &stdout, &stderr)
	t.Logf("loadtest stderr:\n%s", stderr.String())
	require.NoError(t, err, "report:\n%s", stdout.String())
	require.True(t, rep.Passed)
	require.Len(t, rep.Checks, 7)
	for _, c := range rep.Checks {
		require.True(t, c.OK, "%s: %s %v", c.Name, c.Detail, c.Problems)
	}
	require.Equal(t, cfg.Shoppers*cfg.Attempts, rep.Sent)
	require.Zero(t, rep.Outcomes[loadtest.OutcomeError], "errors: %v", rep.Errors)
	require.Zero(t, rep.Outcomes[loadtest.OutcomeUnavailable])
	require.Zero(t, rep.Outcomes[loadtest.OutcomeRateLimited])
	require.Equal(t, rep.AcceptedOrders, rep.Persist.Persisted)
	require.Zero(t, rep.Persist.StillReserved)
	require.Contains(t, stdout.String(), `"passed": true`)
	return rep
}
