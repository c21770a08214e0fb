package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
	"github.com/flashsale/seckill/seckill/apperr"
)

// sale is a small flash sale against a double: 150 shoppers, 3 attempts
// each, for 40 units, quantities 1 or 2, a limit of 2, a third of the later
// attempts replayed.
func sale(t *testing.T, f fault, skew time.Duration) (loadtest.Config, *gateway) {
	t.Helper()
	g, srv := newGateway(t, f, skew)
	cfg := loadtest.DefaultConfig()
	cfg.BaseURL = srv.URL
	cfg.AdminToken, cfg.JWTSecret = g.admin, g.secret
	cfg.Shoppers, cfg.Attempts = 150, 3
	cfg.Stock, cfg.PerUserLimit = 40, 2
	cfg.Quantities = loadtest.QuantityMix{{Quantity: 1, Weight: 70}, {Quantity: 2, Weight: 30}}
	cfg.ReplayShare = 0.3
	cfg.Concurrency = 16
	cfg.OpenIn = time.Second
	cfg.PersistWait = 5 * time.Second
	cfg.Seed = 42
	return cfg, g
}

func run(t *testing.T, cfg loadtest.Config) (loadtest.Report, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	rep, err := loadtest.Run(ctx, cfg, &stdout, &stderr)
	t.Logf("stderr:\n%s", stderr.String())
	if err != nil {
		t.Logf("error: %v", err)
	}
	return rep, stdout.String(), err
}

// failedChecks returns the names of the checks an *InvariantError names.
func failedChecks(t *testing.T, err error) []string {
	t.Helper()
	var ie *loadtest.InvariantError
	require.ErrorAs(t, err, &ie)
	var names []string
	for _, c := range ie.Failed {
		names = append(names, c.Name)
	}
	return names
}

func TestHonestSalePasses(t *testing.T) {
	t.Parallel()
	cfg, _ := sale(t, honest, 0)
	rep, out, err := run(t, cfg)
	t.Logf("report:\n%s", out)
	require.NoError(t, err)
	require.True(t, rep.Passed)
	require.Len(t, rep.Checks, 7)
	for _, c := range rep.Checks {
		require.True(t, c.OK, "%s: %s %v", c.Name, c.Detail, c.Problems)
	}

	require.Equal(t, 450, rep.Planned)
	require.Equal(t, 450, rep.Sent)
	require.Positive(t, rep.ReplaysSent)
	require.Zero(t, rep.Outcomes[loadtest.OutcomeNotStarted], "released before the opening")
	require.Zero(t, rep.Outcomes[loadtest.OutcomeError], "%v", rep.Errors)
	require.Positive(t, rep.Outcomes[loadtest.OutcomeAccepted])
	require.Positive(t, rep.Outcomes[loadtest.OutcomeSoldOut])
	require.Positive(t, rep.RequestsPerSecond)

	// 450 asks for 40 units: it sells out, exactly.
	require.Equal(t, int64(40), rep.Sold)
	require.Equal(t, int64(40), rep.AcceptedUnits)
	require.NotNil(t, rep.StockLeft)
	require.Zero(t, *rep.StockLeft)
	require.NotNil(t, rep.SoldOutAfterMS)
	require.Equal(t, rep.AcceptedOrders, rep.Persist.Persisted)
	require.Equal(t, rep.AcceptedOrders, rep.Persist.Delay.Count)
	// The double stamps created_at an hour after the reservation, and a 202
	// arrives after its reservation and within cfg.Timeout of it: so a delay
	// read from created_at lies in (1h − Timeout, 1h], however busy the
	// machine is. Polling ("first seen") would measure tens of milliseconds.
	require.Equal(t, "created_at", rep.Persist.Method)
	hour := float64(time.Hour.Milliseconds())
	for _, v := range []float64{rep.Persist.Delay.P50MS, rep.Persist.Delay.P99MS, rep.Persist.Delay.MaxMS} {
		require.Greater(t, v, hour-float64(cfg.Timeout.Milliseconds()))
		require.LessOrEqual(t, v, hour)
	}
	require.Equal(t, 16, rep.WarmConnections)
	require.GreaterOrEqual(t, rep.ReleaseLateMS, 0.0, "released at or after the opening")
	require.NotEmpty(t, rep.Timeline)

	require.Contains(t, out, "PASSED")
	require.Contains(t, out, "sold_out")
}

// TestSaleSpreadOverGateways sends the sale to three addresses of one
// system (-target): the buys go to each in turn, and the checks pass
// whichever gateway answered.
func TestSaleSpreadOverGateways(t *testing.T) {
	t.Parallel()
	cfg, g := sale(t, honest, 0)
	s2, n2 := g.another(t)
	s3, n3 := g.another(t)
	cfg.Targets = []string{cfg.BaseURL, s2.URL, strings.TrimPrefix(s3.URL, "http://")}
	_, err := loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-target", strings.Join(cfg.Targets, ",")}, func(k string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": cfg.AdminToken, "SECKILL_JWT_SECRET": cfg.JWTSecret}[k]
	})
	require.NoError(t, err)
	cfg.Targets[2] = s3.URL
	rep, out, err := run(t, cfg)
	t.Logf("report:\n%s", out)
	require.NoError(t, err)
	require.True(t, rep.Passed)
	require.Equal(t, cfg.Targets, rep.Targets)
	require.Len(t, rep.ByTarget, 3)
	for _, tgt := range cfg.Targets {
		n := 0
		for _, c := range rep.ByTarget[tgt] {
			n += c
		}
		require.Equal(t, rep.Sent/3, n, "every third buy went to %s", tgt)
	}
	// The buys and the warm connections reached the other two; the tool's
	// own calls went to the first.
	require.GreaterOrEqual(t, n2.Load(), int64(rep.Sent/3))
	require.GreaterOrEqual(t, n3.Load(), int64(rep.Sent/3))
	require.Equal(t, int64(40), rep.Sold)
	require.Contains(t, out, "Spread over 3 gateways")
}

func TestServerClockIsFollowed(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{3700 * time.Millisecond, -2300 * time.Millisecond} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			cfg, _ := sale(t, honest, skew)
			rep, _, err := run(t, cfg)
			require.NoError(t, err)
			// The Date headers bracket the double's skew whatever the
			// requests' latency, and the tool takes the bracket's lower end:
			// never ahead of the server, so never early. How close it gets
			// depends on the machine's speed and is not asserted.
			skewMS := float64(skew.Milliseconds())
			require.LessOrEqual(t, rep.Clock.LowMS, skewMS, rep.Clock.Method)
			require.Greater(t, rep.Clock.HighMS, skewMS, rep.Clock.Method)
			require.Equal(t, rep.Clock.LowMS, rep.Clock.OffsetMS, rep.Clock.Method)
			// Released by the server's clock: never before the opening.
			require.Zero(t, rep.Outcomes[loadtest.OutcomeNotStarted])
			require.Equal(t, int64(40), rep.Sold)
		})
	}
}

// A sale that breaks a rule fails the run, and the report names the broken
// check and says what went wrong; each case breaks one rule only.
func TestBrokenRuleIsNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault fault
		tune  func(*loadtest.Config)
		check string   // the check that must fail
		only  bool     // and no other
		not   []string // checks that must pass
		says  string   // in the error
	}{
		{name: "oversell", fault: oversell, check: loadtest.CheckNoOversell, says: "oversold"},
		{name: "doubled order", fault: doubleOrder, tune: func(c *loadtest.Config) {
			c.Stock = 10_000 // no sell-out, so only the doubling is wrong
			c.PerUserLimit = 100
		}, check: loadtest.CheckExactlyOnce, not: []string{loadtest.CheckNoOversell}, says: "that no 202 announced"},
		{name: "broken limit", fault: ignoreLimit, tune: func(c *loadtest.Config) {
			c.Stock, c.PerUserLimit, c.ReplayShare = 10_000, 1, 0
		}, check: loadtest.CheckPerUserLimit, only: true, says: "limit 1"},
		{name: "forgotten replay", fault: forgetReplay, tune: func(c *loadtest.Config) {
			c.Stock, c.PerUserLimit, c.ReplayShare = 10_000, 10, 0.5
			c.Quantities = loadtest.QuantityMix{{Quantity: 1, Weight: 1}}
		}, check: loadtest.CheckReplays, says: "Idempotency-Key"},
		{name: "stale catalog", fault: frozenCatalog, check: loadtest.CheckStockLeft, only: true, says: "stock_left 40"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, _ := sale(t, tc.fault, 0)
			if tc.tune != nil {
				tc.tune(&cfg)
			}
			rep, out, err := run(t, cfg)
			require.Error(t, err)
			failed := failedChecks(t, err)
			if tc.only {
				require.Equal(t, []string{tc.check}, failed)
			}
			require.Contains(t, failed, tc.check)
			for _, c := range tc.not {
				require.NotContains(t, failed, c)
			}
			require.Contains(t, err.Error(), tc.says)
			require.False(t, rep.Passed)
			require.Contains(t, out, "FAIL")
			if tc.fault == oversell {
				require.Greater(t, rep.Sold, cfg.Stock)
			}
		})
	}
}

// The public voucher read is the gateway's catalog, which copies the live
// stock every StockEvery (100 ms) and later on a loaded machine, while the
// check reads it a few milliseconds after the last order is persisted: a
// copy that trails the stock passes once it has caught up; one that never
// does fails (TestBrokenRuleIsNamed's stale catalog).
func TestCatalogThatTrailsTheStockPasses(t *testing.T) {
	t.Parallel()
	cfg, g := sale(t, honest, 0)
	g.catalogLag = 1500 * time.Millisecond
	rep, _, err := run(t, cfg)
	require.NoError(t, err)
	require.True(t, rep.Passed)
	require.Equal(t, cfg.Stock, rep.Sold)
	require.NotNil(t, rep.StockLeft)
	require.Zero(t, *rep.StockLeft)
}

func TestWrongAdminTokenStopsTheRun(t *testing.T) {
	t.Parallel()
	cfg, _ := sale(t, honest, 0)
	cfg.AdminToken = "wrong"
	rep, out, err := run(t, cfg)
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	require.Empty(t, rep.VoucherID)
	require.Empty(t, out)
}

func TestJSONReport(t *testing.T) {
	t.Parallel()
	cfg, _ := sale(t, honest, 0)
	cfg.Shoppers, cfg.Attempts = 30, 1
	cfg.JSON = true
	rep, out, err := run(t, cfg)
	require.NoError(t, err)
	var back loadtest.Report
	require.NoError(t, json.Unmarshal([]byte(out), &back))
	require.Equal(t, rep.VoucherID, back.VoucherID)
	require.Equal(t, rep.Outcomes, back.Outcomes)
	require.True(t, back.Passed)
}

func TestHTMLReportRendersInChromium(t *testing.T) {
	t.Parallel()
	cfg, _ := sale(t, honest, 0)
	cfg.HTMLFile = filepath.Join(t.TempDir(), "report.html")
	_, _, err := run(t, cfg)
	require.NoError(t, err)

	page, err := os.ReadFile(cfg.HTMLFile)
	require.NoError(t, err)
	for _, external := range []string{"<script", "<link", "src=", "@import", "url("} {
		require.NotContains(t, string(page), external, "the page must be self-contained")
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	type chart struct {
		Name   string   `json:"name"`
		Paths  int      `json:"paths"`
		Drawn  int      `json:"drawn"`
		Width  float64  `json:"width"`
		Series []string `json:"series"`
	}
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate("file://"+cfg.HTMLFile),
		chromedp.WaitVisible(chromedp.CSS("svg.chart")),
	))
	charts, err := chromedp.Run(bctx, chromedp.Evaluate[[]chart](`[...document.querySelectorAll('svg.chart')].map(s => {
		const paths = [...s.querySelectorAll('path.series')];
		return {
			name: s.dataset.chart,
			paths: paths.length,
			drawn: paths.filter(p => (p.getAttribute('d') || '').length > 0 && p.getTotalLength() > 0 && p.getBBox().width > 0).length,
			width: s.getBoundingClientRect().width,
			series: paths.map(p => p.dataset.series),
		};
	})`))
	require.NoError(t, err)
	require.Len(t, charts, 2)
	require.Equal(t, "latency", charts[0].Name)
	require.Equal(t, "throughput", charts[1].Name)
	for _, c := range charts {
		require.Positive(t, c.Paths, c.Name)
		require.Equal(t, c.Paths, c.Drawn, "%s: every series path has a non-empty, drawn d", c.Name)
		require.Greater(t, c.Width, 100.0, c.Name)
	}
	require.ElementsMatch(t, []string{"max", "p99", "p90", "p50"}, charts[0].Series)
	require.Subset(t, charts[1].Series, []string{"sent", "accepted", "sold_out"})
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"SECKILL_ADMIN_TOKEN": "adm",
		"SECKILL_JWT_SECRET":  "sec",
	}
	cfg, err := loadtest.ParseFlags(loadtest.ScenarioSale, nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	want := loadtest.DefaultConfig()
	want.AdminToken, want.JWTSecret = "adm", "sec"
	require.Equal(t, want, cfg)

	cfg, err = loadtest.ParseFlags(loadtest.ScenarioSale, strings.Fields(
		"-url http://gw:9000 -shoppers 10 -attempts 4 -stock 7 -limit 3 -kind limit -qty 1:80,2:20 -replay 0.25 "+
			"-concurrency 8 -rate 500 -duration 5s -open-in 2s -persist-wait 1m -pause-before-checks 3s -seed 9 --json --html out.html -one-address"),
		func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.PauseBeforeChecks)
	require.True(t, cfg.OneAddress, "the shoppers without addresses of their own")
	_, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-pause-before-checks", "-1s"}, func(k string) string { return env[k] })
	require.ErrorContains(t, err, "pause-before-checks must not be negative")
	require.Equal(t, "http://gw:9000", cfg.BaseURL)
	require.Equal(t, 10, cfg.Shoppers)
	require.Equal(t, 4, cfg.Attempts)
	require.Equal(t, int64(7), cfg.Stock)
	require.Equal(t, int64(3), cfg.PerUserLimit)
	require.Equal(t, "limit", cfg.Kind)
	require.Equal(t, loadtest.QuantityMix{{Quantity: 1, Weight: 80}, {Quantity: 2, Weight: 20}}, cfg.Quantities)
	require.Equal(t, 0.25, cfg.ReplayShare)
	require.Equal(t, 8, cfg.Concurrency)
	require.Equal(t, 500.0, cfg.Rate)
	require.Equal(t, 5*time.Second, cfg.Duration)
	require.Equal(t, 2*time.Second, cfg.OpenIn)
	require.Equal(t, time.Minute, cfg.PersistWait)
	require.Equal(t, int64(9), cfg.Seed)
	require.True(t, cfg.JSON)
	require.Equal(t, "out.html", cfg.HTMLFile)

	env["SECKILL_DATABASE_URL"], env["SECKILL_DATA_DIR"] = "postgres://x@db/seckill", "/srv/dev"
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioCrowd, strings.Fields(
		"-fresh 0.25 -catalog-reads 100 -catalog-size 3 -sockets 9 -buyers 7 -bots 2 -bot-conns 5 -visitors 1 -crowd-for 2s -pg-settle 1s -one-address"),
		func(k string) string { return env[k] })
	require.NoError(t, err)
	require.True(t, cfg.Crowd)
	require.Equal(t, []int{100, 3, 9, 7, 2, 5, 1}, []int{cfg.CatalogReads, cfg.CatalogSize, cfg.Sockets, cfg.Buyers, cfg.Bots, cfg.BotConns, cfg.Visitors})
	require.Equal(t, 2*time.Second, cfg.CrowdFor)
	require.Equal(t, time.Second, cfg.PGSettle)
	require.True(t, cfg.OneAddress)
	require.Equal(t, 0.25, cfg.FreshShare)
	require.Equal(t, "postgres://x@db/seckill", cfg.DatabaseURL)
	require.Equal(t, "/srv/dev", cfg.DataDir)
	_, err = loadtest.ParseFlags(loadtest.ScenarioCrowd, []string{"-buyers", "0"}, func(k string) string { return env[k] })
	require.ErrorIs(t, err, apperr.ErrInvalidInput)

	_, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-h"}, nil)
	require.ErrorIs(t, err, flag.ErrHelp)

	for _, bad := range [][]string{{"-qty", "1:x"}, {"-qty", "0"}, {"-replay", "2"}, {"-open-in", "10ms"}, {"-kind", "auction"}, {"extra"}} {
		_, err = loadtest.ParseFlags(loadtest.ScenarioSale, bad, func(k string) string { return env[k] })
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%v", bad)
	}
	_, err = loadtest.ParseFlags(loadtest.ScenarioSale, nil, nil)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	require.ErrorContains(t, err, "SECKILL_JWT_SECRET is not set")

	cfg, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-target", "gw1:9000, http://gw2:9000/,https://gw3"}, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []string{"http://gw1:9000", "http://gw2:9000", "https://gw3"}, cfg.Targets)
	require.Equal(t, "http://gw1:9000", cfg.BaseURL, "the tool's own calls go to the first")
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-shards", "8"}, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, 8, cfg.Shards)
	for _, bad := range [][]string{{"-shards", "65"}, {"-shards", "-1"}, {"-target", ","}, {"-target", "gw1:9000", "-url", "http://gw:1"}, {"-target", "ftp://gw"}} {
		_, err = loadtest.ParseFlags(loadtest.ScenarioSale, bad, func(k string) string { return env[k] })
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%v", bad)
	}

	var usage bytes.Buffer
	loadtest.Usage(&usage, loadtest.ScenarioSale)
	require.Contains(t, usage.String(), "-shoppers")
	require.True(t, errors.Is(err, apperr.ErrInvalidInput))
}

// TestParseFlagsReadsDevEnv: against `seckill dev`, what the environment
// and the flags leave unset comes from the dev.env of -data-dir, and what
// they set wins over it.
func TestParseFlagsReadsDevEnv(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, devstack.EnvFile), []byte("# comment\n"+
		"SECKILL_LOADTEST_URL=http://127.0.0.1:18080\nSECKILL_LOADTEST_METRICS_URL=http://127.0.0.1:18081\n"+
		"SECKILL_ADMIN_TOKEN=admin-from-file\nSECKILL_JWT_SECRET=secret-from-file\n"), 0o600))

	cfg, err := loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-data-dir", dir}, nil)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:18080", cfg.BaseURL)
	require.Equal(t, "http://127.0.0.1:18081", cfg.MetricsURL)
	require.Equal(t, "admin-from-file", cfg.AdminToken)
	require.Equal(t, "secret-from-file", cfg.JWTSecret)
	require.Equal(t, filepath.Join(dir, devstack.EnvFile), cfg.DevEnv)

	env := map[string]string{loadtest.EnvJWTSecret: "secret-from-env", loadtest.EnvURL: "http://127.0.0.1:9"}
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-data-dir", dir}, func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "secret-from-env", cfg.JWTSecret, "the environment wins")
	require.Equal(t, "http://127.0.0.1:9", cfg.BaseURL)
	require.Equal(t, "admin-from-file", cfg.AdminToken, "and the file fills the rest")

	cfg, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-data-dir", dir, "-url", "http://127.0.0.1:7"}, nil)
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:7", cfg.BaseURL, "a flag wins")

	_, err = loadtest.ParseFlags(loadtest.ScenarioSale, []string{"-data-dir", t.TempDir()}, nil)
	require.ErrorContains(t, err, "SECKILL_JWT_SECRET is not set (nor in ")
}

// Each scenario reads only its own flags: one of another scenario is an
// unknown flag, and the scenario's field that selects its run is set.
func TestParseFlagsPerScenario(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": "adm", "SECKILL_JWT_SECRET": "sec", "SECKILL_REDIS_URL": "redis://r:6379"}[k]
	}
	cfg, err := loadtest.ParseFlags(loadtest.ScenarioRoom, strings.Fields("-shoppers 30 -room-rate 5 -room-bots 2"), env)
	require.NoError(t, err)
	require.Equal(t, []int64{30, 5, 2}, []int64{int64(cfg.Room), cfg.RoomRate, int64(cfg.RoomBots)})
	require.False(t, cfg.Crowd)
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioChurn, strings.Fields("-for 3s -shoppers 4"), env)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.Churn)
	require.Equal(t, "redis://r:6379", cfg.RedisURL)
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioCeiling, nil, nil)
	require.NoError(t, err, "the ceiling needs no secrets")
	require.Equal(t, "/healthz", cfg.Ceiling)
	cfg, err = loadtest.ParseFlags(loadtest.ScenarioCrowd, nil, env)
	require.NoError(t, err)
	require.True(t, cfg.Crowd)

	for s, foreign := range map[loadtest.Scenario]string{
		loadtest.ScenarioSale:    "-room-rate",
		loadtest.ScenarioCrowd:   "-attempts",
		loadtest.ScenarioRoom:    "-catalog-reads",
		loadtest.ScenarioChurn:   "-path",
		loadtest.ScenarioCeiling: "-shoppers",
	} {
		_, err := loadtest.ParseFlags(s, []string{foreign, "1"}, env)
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%s %s", s, foreign)
		var usage bytes.Buffer
		loadtest.Usage(&usage, s)
		require.Contains(t, usage.String(), "usage: loadtest "+string(s))
		require.NotContains(t, usage.String(), foreign+" ", "%s -h lists only its own flags", s)
	}
	for _, bad := range []struct {
		s    loadtest.Scenario
		args string
	}{{loadtest.ScenarioRoom, "-shoppers 0"}, {loadtest.ScenarioChurn, "-for 0s"}, {loadtest.ScenarioCeiling, "-path healthz"}, {"auction", ""}} {
		_, err := loadtest.ParseFlags(bad.s, strings.Fields(bad.args), env)
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%s %s", bad.s, bad.args)
	}
}
