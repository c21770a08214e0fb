package main

// The figures of `make bench` beside the machine's ceilings: the Redis
// ceiling (redis-benchmark on reserve.lua), what the workers did, and the
// table.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// redisCeiling starts a redis-server like dev mode's (same binary, no
// snapshots, append-only file), puts one voucher on sale in it with more
// stock than the calls, loads reserve.lua, and runs redis-benchmark on it
// with the buying path's command (redisstock.ReserveCommand): a random user
// and a random order id per call.
func redisCeiling(ctx context.Context, work string, n int) (float64, error) {
	for _, b := range []string{"redis-server", "redis-benchmark"} {
		if _, err := exec.LookPath(b); err != nil {
			return 0, fmt.Errorf("%s is not installed (make deps installs redis-server, which brings it)", b)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir := filepath.Join(work, "redis-ceiling")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	srv := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
		"--dir", dir, "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := srv.Start(); err != nil {
		return 0, fmt.Errorf("redis-server: %w", err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			return 0, errors.New("the ceiling's redis-server did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The voucher is put on sale and its stock read through redisstock, the
	// one owner of the stock's key layout; its stock never runs out here.
	stock := redisstock.New(redisstock.Config{Redis: rdb})
	now := time.Now()
	v := seckill.Voucher{ID: 1, PriceCents: 100, StockTotal: seckill.MaxStock, StockLeft: seckill.MaxStock,
		PerUserLimit: seckill.MaxStock, BeginAt: now.Add(-time.Minute), EndAt: now.Add(time.Hour)}
	if int64(n) > v.StockTotal {
		return 0, fmt.Errorf("redis-benchmark: %d requests are more than the largest stock (%d)", n, v.StockTotal)
	}
	if err := stock.Warm(ctx, v); err != nil {
		return 0, err
	}
	sha, err := rdb.ScriptLoad(ctx, lua.Reserve).Result()
	if err != nil {
		return 0, err
	}
	args := append([]string{"-p", port, "-n", strconv.Itoa(n), "-c", "50", "-r", "1000000000", "-q"},
		redisstock.ReserveCommand(sha, v.ID, "__rand_int__")...)
	cmd := exec.CommandContext(ctx, "redis-benchmark", args...)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark: %w", err)
	}
	// -q prints progress lines ending in \r, then "EVALSHA ...: N requests per second...".
	m := regexp.MustCompile(`([0-9.]+) requests per second`).FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("redis-benchmark said: %q", out)
	}
	rate, err := strconv.ParseFloat(string(m[len(m)-1][1]), 64)
	if err != nil {
		return 0, err
	}
	// The script must have held stock: a benchmark of refusals would flatter.
	left, err := stock.StockLeft(ctx, v.ID)
	if err != nil {
		return 0, err
	}
	if held := v.StockLeft - left[v.ID]; held < int64(n)*9/10 {
		return 0, fmt.Errorf("redis-benchmark: only %d of %d calls held stock", held, n)
	}
	return rate, nil
}

// workerSummary reads the process's /metrics (on its ops listener at
// metrics) after the accepted run: how the workers batched and how long
// their transactions took.
func workerSummary(ctx context.Context, metrics string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics+"/metrics", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return ""
	}
	hist := func(name string) (count uint64, sum float64) {
		if f, ok := fams[name]; ok && len(f.GetMetric()) > 0 {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
		return 0, 0
	}
	batches, orders := hist("seckill_consumer_batch_size")
	txs, secs := hist("seckill_persist_duration_seconds")
	if batches == 0 || txs == 0 {
		return ""
	}
	return fmt.Sprintf("%d batches of %.0f orders on average, %.1f ms per PostgreSQL transaction on average",
		batches, orders/float64(batches), 1000*secs/float64(txs))
}

// fiveXX counts a report's 5xx answers: 503s and other 5xx errors.
func fiveXX(r loadtest.Report) int {
	n := r.Outcomes[loadtest.OutcomeUnavailable]
	for detail, c := range r.Errors {
		if strings.HasPrefix(detail, "HTTP 5") {
			n += c
		}
	}
	return n
}

// rate is how many answers of outcome o came per second of the crowd.
func rate(r loadtest.Report, o loadtest.Outcome) float64 {
	if r.ElapsedMS <= 0 {
		return 0
	}
	return float64(r.Outcomes[o]) / (r.ElapsedMS / 1000)
}

// row is one line of the target table.
type row struct {
	figure, measured, target, stretch string
	met                               bool
}

func printTable(w io.Writer, o options, res results) {
	acc, so := res.accepted, res.soldOut
	accRate := rate(acc, loadtest.OutcomeAccepted)
	soRate := so.RequestsPerSecond
	accShare, soShare := accRate/res.evalsha, soRate/res.trivial.RequestsPerSecond
	accP99, soP99 := acc.Latency["all"].P99MS, so.Latency["all"].P99MS
	d := acc.Persist.Delay
	n5 := fiveXX(acc) + fiveXX(so)

	rows := []row{
		{"accepted reservations/s ÷ EVALSHA/s",
			fmt.Sprintf("%.0f%% (%.0f/s of %.0f/s)", 100*accShare, accRate, res.evalsha),
			pct(targetAcceptedShare), pct(stretchAcceptedShare), accShare >= targetAcceptedShare},
		{"sold-out answers/s ÷ GET /healthz/s",
			fmt.Sprintf("%.0f%% (%.0f/s of %.0f/s)", 100*soShare, soRate, res.trivial.RequestsPerSecond),
			pct(targetSoldOutShare), pct(stretchSoldOutShare), soShare >= targetSoldOutShare},
		{fmt.Sprintf("accepted p99, %d in flight", o.concurrency), fmt.Sprintf("%.1f ms", accP99),
			fmt.Sprintf("≤ %.0f ms", targetP99MS), fmt.Sprintf("≤ %.0f ms", stretchP99MS), accP99 <= targetP99MS},
		{fmt.Sprintf("sold-out p99, %d in flight", o.concurrency), fmt.Sprintf("%.1f ms", soP99),
			fmt.Sprintf("≤ %.0f ms", targetP99MS), fmt.Sprintf("≤ %.0f ms", stretchP99MS), soP99 <= targetP99MS},
		{"202 → created p99", fmt.Sprintf("%.0f ms (%d still reserved)", d.P99MS, acc.Persist.StillReserved),
			fmt.Sprintf("≤ %.0f ms", targetPersistP99MS), "–", d.P99MS <= targetPersistP99MS && acc.Persist.StillReserved == 0},
	}
	cpu := row{figure: "gateway CPU per accepted buy", target: "reported",
		stretch: fmt.Sprintf("≤ %s (half of %s)", fmtMicros(baselineGatewayCPUPerBuy/2), fmtMicros(baselineGatewayCPUPerBuy))}
	if per, ok := res.cpu.share.perBuy(); ok {
		cpu.measured, cpu.met = fmtMicros(per), true
	} else {
		cpu.measured = fmt.Sprintf("not measured: %v", res.cpu.err)
	}
	rows = append(rows, cpu)
	allocs := row{figure: "allocations per buy (BenchmarkHandlerBuy)", target: fmt.Sprintf("≤ %d", targetAllocsPerBuy), stretch: "–"}
	if res.allocsErr == "" {
		allocs.measured, allocs.met = strconv.Itoa(res.allocs), res.allocs <= targetAllocsPerBuy
	} else {
		allocs.measured = "not measured: " + res.allocsErr
	}
	rows = append(rows, allocs,
		row{"5xx answers (both runs)", strconv.Itoa(n5), "0", "–", n5 == 0},
		row{"invariants (both runs)", passed(acc, so), "all pass", "–", acc.Passed && so.Passed})

	fmt.Fprintf(w, "\nmake bench: %d in flight; accepted run %d shoppers × 1, sold-out run %d × %d for 100 units\n\n",
		o.concurrency, acc.Shoppers, so.Shoppers, so.Attempts)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\ttarget\tstretch\tverdict")
	for _, r := range rows {
		v := "MISSED"
		if r.met {
			v = "MET"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.figure, r.measured, r.target, r.stretch, v)
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nlatency p50 / p99 / max: accepted run %s, sold-out run %s, GET /healthz %.1f / %.1f / %.0f ms\n",
		fmtLatency(acc.Latency["all"]), fmtLatency(so.Latency["all"]),
		res.trivial.Latency.P50MS, res.trivial.Latency.P99MS, res.trivial.Latency.MaxMS)
	fmt.Fprintf(w, "202 → created p50 / p99 / max: %.0f / %.0f / %.0f ms\n", d.P50MS, d.P99MS, d.MaxMS)
	printCPU(w, "accepted run", "accepted buys", res.cpu.share)
	printCPU(w, "sold-out run", "answers", res.soldOutCPU.share)
	printCPU(w, "GET /healthz ceiling", "requests", res.healthzCPU.share)
	if res.worker != "" {
		fmt.Fprintf(w, "workers during the accepted run: %s\n", res.worker)
	}
	if so.SoldOutAfterMS != nil {
		fmt.Fprintf(w, "sold out %.0f ms after the opening; accepted run sent %d requests in %.1f s (%.0f/s overall)\n",
			*so.SoldOutAfterMS, acc.Sent, acc.ElapsedMS/1000, acc.RequestsPerSecond)
	}
	if len(o.env) > 0 {
		fmt.Fprintf(w, "system under test run with: %s\n", strings.Join(o.env, " "))
	}
}

// printCPU says how a crowd's profile split the process's CPU by role, and
// the gateway's CPU per buy it counted; nothing when it counted none.
func printCPU(w io.Writer, run, counted string, c cpuShare) {
	per, ok := c.perBuy()
	if !ok {
		return
	}
	total := time.Duration(0)
	for _, v := range c.byRole {
		total += v
	}
	fmt.Fprintf(w, "CPU of the dev process during %s of the %s (%.0f %s): gateway %s (%s each), worker %s, broker %s, total %s (%.2f cores)\n",
		c.window, run, c.answers, counted, c.gateway().Round(time.Millisecond), fmtMicros(per),
		c.byRole["worker"].Round(time.Millisecond), c.byRole["broker"].Round(time.Millisecond),
		total.Round(time.Millisecond), total.Seconds()/c.window.Seconds())
}

func pct(f float64) string { return fmt.Sprintf("≥ %.0f%%", 100*f) }

func fmtMicros(d time.Duration) string {
	return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
}

func fmtLatency(l loadtest.LatencyStats) string {
	return fmt.Sprintf("%.1f / %.1f / %.0f ms", l.P50MS, l.P99MS, l.MaxMS)
}

func passed(rs ...loadtest.Report) string {
	var parts []string
	for _, r := range rs {
		ok := 0
		for _, c := range r.Checks {
			if c.OK {
				ok++
			}
		}
		parts = append(parts, fmt.Sprintf("%d/%d", ok, len(r.Checks)))
	}
	return strings.Join(parts, ", ")
}
