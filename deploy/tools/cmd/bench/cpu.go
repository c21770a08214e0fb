package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/flashsale/seckill/seckill/pause"
	"github.com/google/pprof/profile"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// profileRole is the pprof label dev mode puts on the goroutines of the
// in-process broker ("broker") and of the order workers ("worker"); the
// gateway's goroutines carry none.
const profileRole = "role"

// cpuShare is a CPU profile of the dev process split by the role label, and
// the buys counted while it ran (accepted ones in the accepted run, every
// answer in the sold-out run).
type cpuShare struct {
	window  time.Duration
	byRole  map[string]time.Duration // "" is the gateway (and the runtime's own goroutines)
	answers float64                  // buys answered during the profile
}

// gateway is the CPU of the goroutines without a role: the HTTP server, the
// gates, the Redis and Kafka clients, and the runtime (GC) of the process.
func (c cpuShare) gateway() time.Duration { return c.byRole[""] }

// perBuy is the gateway's CPU per buy counted; ok is false without buys.
func (c cpuShare) perBuy() (time.Duration, bool) {
	if c.answers <= 0 {
		return 0, false
	}
	return time.Duration(float64(c.gateway()) / c.answers), true
}

// splitProfile sums a CPU profile's samples by the value of the role label.
func splitProfile(r io.Reader) (map[string]time.Duration, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("not a CPU profile (sample types %v)", p.SampleType)
	}
	by := map[string]time.Duration{}
	for _, s := range p.Sample {
		role := ""
		if v := s.Label[profileRole]; len(v) > 0 {
			role = v[0]
		}
		by[role] += time.Duration(s.Value[idx])
	}
	return by, nil
}

// crowdProfile is a CPU profile of the dev process anchored to one crowd:
// it starts at the crowd's first answer counted (a buy of the outcome, or a
// request of the trivial route), so that a busy machine, whose load tool
// can take longer to prepare than -open-in, delays the window instead of
// emptying it.
type crowdProfile struct {
	base, path string
	count      func(context.Context) (float64, error) // the answers so far, from the ops listener
	what       string                                 // what count counts, for errors
	seconds    int
	from       float64 // the count before the crowd
	done       chan crowdProfileResult
}

type crowdProfileResult struct {
	share cpuShare
	err   error
}

// startCrowdProfile reads the buys of outcome answered before the crowd
// (call it before starting the load tool), then waits in the background for
// the count to rise and profiles seconds from there; wait returns the
// result.
func startCrowdProfile(ctx context.Context, base, metrics, path, outcome string, seconds int) (*crowdProfile, error) {
	count := func(ctx context.Context) (float64, error) { return buyAnswers(ctx, metrics, outcome) }
	return startProfile(ctx, base, path, seconds, count, answerName(outcome))
}

// startProfile is startCrowdProfile of whatever count counts (what names
// it in errors).
func startProfile(ctx context.Context, base, path string, seconds int, count func(context.Context) (float64, error), what string) (*crowdProfile, error) {
	from, err := count(ctx)
	if err != nil {
		return nil, err
	}
	p := &crowdProfile{base: base, path: path, count: count, what: what, seconds: seconds, from: from,
		done: make(chan crowdProfileResult, 1)}
	go func() {
		share, err := p.take(ctx)
		p.done <- crowdProfileResult{share, err}
	}()
	return p, nil
}

// wait returns the profile's split and the answers counted during it.
func (p *crowdProfile) wait() (cpuShare, error) {
	r := <-p.done
	return r.share, r.err
}

func (p *crowdProfile) take(ctx context.Context) (cpuShare, error) {
	count := p.count
	anchor, err := awaitRise(ctx, count, p.from, 2*time.Minute, 50*time.Millisecond)
	if err != nil {
		return cpuShare{}, err
	}
	if err := takeProfile(ctx, p.base, p.path, p.seconds); err != nil {
		return cpuShare{}, err
	}
	end, err := count(ctx)
	if err != nil {
		return cpuShare{}, err
	}
	f, err := os.Open(p.path)
	if err != nil {
		return cpuShare{}, err
	}
	defer f.Close()
	by, err := splitProfile(f)
	if err != nil {
		return cpuShare{}, fmt.Errorf("%s: %w", p.path, err)
	}
	if end <= anchor {
		return cpuShare{}, fmt.Errorf("no %s during the %d s profile", p.what, p.seconds)
	}
	return cpuShare{window: time.Duration(p.seconds) * time.Second, byRole: by, answers: end - anchor}, nil
}

// awaitRise polls count every poll until it exceeds from, and returns the
// count it saw; it gives up after within.
func awaitRise(ctx context.Context, count func(context.Context) (float64, error), from float64, within, poll time.Duration) (float64, error) {
	for deadline := time.Now().Add(within); ; {
		n, err := count(ctx)
		if err != nil {
			return 0, err
		}
		if n > from {
			return n, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the crowd's first answer did not come within %s of the run's start", within)
		}
		if err := pause.For(ctx, poll); err != nil {
			return 0, err
		}
	}
}

// answerName words what a profile counted, for its errors.
func answerName(outcome string) string {
	if outcome == "" {
		return "buy answer"
	}
	return outcome + " buy"
}

// buyAnswers reads the gateway's /metrics, on its ops listener at metrics,
// for the buys answered with outcome so far (every outcome when outcome is
// "").
func buyAnswers(ctx context.Context, metrics, outcome string) (float64, error) {
	return readMetrics(ctx, metrics, func(r io.Reader) (float64, error) { return countOutcomes(r, outcome) })
}

// routeRequests reads the gateway's /metrics, on its ops listener at
// metrics, for the requests answered on route so far.
func routeRequests(ctx context.Context, metrics, route string) (float64, error) {
	return readMetrics(ctx, metrics, func(r io.Reader) (float64, error) { return countRoute(r, route) })
}

// readMetrics reads the ops listener's /metrics at metrics through count.
func readMetrics(ctx context.Context, metrics string, count func(io.Reader) (float64, error)) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return count(resp.Body)
}

// countRoute sums seckill_http_requests_total of a Prometheus text
// exposition over the series of route, whatever their method and status.
func countRoute(r io.Reader, route string) (float64, error) {
	return sumCounter(r, "seckill_http_requests_total", "route", func(v string) bool { return v == route })
}

// countOutcomes sums seckill_buy_outcomes_total of a Prometheus text
// exposition over the series of outcome (all series when outcome is "").
func countOutcomes(r io.Reader, outcome string) (float64, error) {
	return sumCounter(r, "seckill_buy_outcomes_total", "outcome", func(v string) bool { return outcome == "" || v == outcome })
}

// sumCounter sums the counter family name of a Prometheus text exposition
// over the series whose label's value match says yes to (0 without the
// family).
func sumCounter(r io.Reader, name, label string, match func(string) bool) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, err
	}
	f, ok := fams[name]
	if !ok {
		return 0, nil
	}
	var n float64
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && match(l.GetValue()) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n, nil
}

// allocsPerBuy runs the gateway's BenchmarkHandlerBuy (in memory, the
// gateway's own cost of a buy) and returns its allocations per buy.
func allocsPerBuy(ctx context.Context) (int, error) {
	root, err := moduleRoot()
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkHandlerBuy$",
		"-benchtime", "5000x", "-benchmem", "-count", "1", "./gateway/")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("go test -bench BenchmarkHandlerBuy: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`BenchmarkHandlerBuy\S*\s+\d+\s+[0-9.]+ ns/op\s+\d+ B/op\s+(\d+) allocs/op`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("go test -bench BenchmarkHandlerBuy said: %s", out)
	}
	return strconv.Atoi(string(m[1]))
}

// moduleRoot is the product's folder: the first one from the working
// directory up that holds both a go.mod and the gateway. The tools' own
// module (deploy/tools, where `go -C deploy/tools run` starts) has a go.mod
// too, and no gateway.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		_, mod := os.Stat(filepath.Join(dir, "go.mod"))
		_, gw := os.Stat(filepath.Join(dir, "gateway"))
		if mod == nil && gw == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s: run deploy/tools/cmd/bench from the repository", dir)
		}
		dir = parent
	}
}
