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

	"github.com/flashsale/seckill/deploy/loadtest"
	"github.com/flashsale/seckill/lua"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// redisCeiling starts a redis-server like dev mode's (same binary, no
// snapshots, append-only file), puts one voucher's meta in it with stock
// that never runs out, loads reserve.lua, and runs redis-benchmark on it
// with the buying path's key shape: six keys in one hash tag, a random user
// (its per-user set too) and a random order id per call.
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
	now := time.Now().UnixMilli()
	if err := rdb.HSet(ctx, "seckill:{v1}:meta", "stock", 1_000_000_000_000, "total", 1_000_000_000_000,
		"begin_ms", now-60_000, "end_ms", now+3_600_000, "limit", 1_000_000, "price", 100).Err(); err != nil {
		return 0, err
	}
	sha, err := rdb.ScriptLoad(ctx, lua.Reserve).Result()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "redis-benchmark", "-p", port, "-n", strconv.Itoa(n), "-c", "50",
		"-r", "1000000000", "-q", "EVALSHA", sha, "6",
		"seckill:{v1}:meta", "seckill:{v1}:buyers", "seckill:{v1}:reqs", "seckill:{v1}:orders",
		"seckill:{v1}:pending", "seckill:{v1}:user:__rand_int__", "__rand_int__", "__rand_int__", "1", "")
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
	left, err := rdb.HGet(ctx, "seckill:{v1}:meta", "stock").Int64()
	if err != nil {
		return 0, err
	}
	if held := 1_000_000_000_000 - left; held < int64(n)*9/10 {
		return 0, fmt.Errorf("redis-benchmark: only %d of %d calls held stock", held, n)
	}
	return rate, nil
}

// workerSummary reads the process's /metrics after the accepted run: how the
// workers batched and how long their transactions took.
func workerSummary(ctx context.Context, base string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
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

func printTable(w io.Writer, o options, res results) {
	acc, so := res.accepted, res.soldOut
	accRate := rate(acc, loadtest.OutcomeAccepted)
	soRate := so.RequestsPerSecond
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISSED"
	}
	fmt.Fprintf(w, "\nmake bench: %d-way concurrency; accepted run %d shoppers × 1, sold-out run %d × %d for 100 units\n\n",
		o.concurrency, acc.Shoppers, so.Shoppers, so.Attempts)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tvalue\tceiling\tratio\ttarget\tverdict")
	fmt.Fprintf(tw, "accepted reservations/s\t%.0f\t%.0f EVALSHA/s (redis-benchmark)\t%.0f%%\t≥ %.0f%%\t%s\n",
		accRate, res.evalsha, 100*accRate/res.evalsha, 100*targetAcceptedShare, verdict(accRate >= targetAcceptedShare*res.evalsha))
	fmt.Fprintf(tw, "sold-out answers/s\t%.0f\t%.0f GET /healthz/s\t%.0f%%\t≥ %.0f%%\t%s\n",
		soRate, res.trivial.RequestsPerSecond, 100*soRate/res.trivial.RequestsPerSecond, 100*targetSoldOutShare,
		verdict(soRate >= targetSoldOutShare*res.trivial.RequestsPerSecond))
	for _, r := range []struct {
		name string
		rep  loadtest.Report
	}{{"accepted run", acc}, {"sold-out run", so}} {
		l := r.rep.Latency["all"]
		fmt.Fprintf(tw, "%s p50 / p99 / max\t%.1f / %.1f / %.0f ms\t%.1f / %.1f ms (/healthz)\t\t≤ %.0f ms\t%s\n",
			r.name, l.P50MS, l.P99MS, l.MaxMS, res.trivial.Latency.P50MS, res.trivial.Latency.P99MS, targetP99MS, verdict(l.P99MS <= targetP99MS))
	}
	n5 := fiveXX(acc) + fiveXX(so)
	fmt.Fprintf(tw, "5xx answers\t%d\t\t\t0\t%s\n", n5, verdict(n5 == 0))
	d := acc.Persist.Delay
	fmt.Fprintf(tw, "202 → created p50 / p99 / max\t%.0f / %.0f / %.0f ms\t\t\t≤ %.0f ms\t%s\n",
		d.P50MS, d.P99MS, d.MaxMS, targetPersistP99MS, verdict(d.P99MS <= targetPersistP99MS && acc.Persist.StillReserved == 0))
	fmt.Fprintf(tw, "invariants (both runs)\t%s\t\t\tall pass\t%s\n", passed(acc, so), verdict(acc.Passed && so.Passed))
	_ = tw.Flush()
	if res.worker != "" {
		fmt.Fprintf(w, "\nworkers during the accepted run: %s\n", res.worker)
	}
	if so.SoldOutAfterMS != nil {
		fmt.Fprintf(w, "\nsold out %.0f ms after the opening; accepted run sent %d requests in %.1f s (%.0f/s overall)\n",
			*so.SoldOutAfterMS, acc.Sent, acc.ElapsedMS/1000, acc.RequestsPerSecond)
	}
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
