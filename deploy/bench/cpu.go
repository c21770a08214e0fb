package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// profileRole is the pprof label dev mode puts on the goroutines of the
// in-process broker ("broker") and of the order workers ("worker"); the
// gateway's goroutines carry none.
const profileRole = "role"

// cpuShare is a CPU profile of the dev process split by the role label, and
// the accepted buys counted while it ran.
type cpuShare struct {
	window   time.Duration
	byRole   map[string]time.Duration // "" is the gateway (and the runtime's own goroutines)
	accepted float64                  // accepted buys during the profile
}

// gateway is the CPU of the goroutines without a role: the HTTP server, the
// gates, the Redis and Kafka clients, and the runtime (GC) of the process.
func (c cpuShare) gateway() time.Duration { return c.byRole[""] }

// perBuy is the gateway's CPU per accepted buy; ok is false without buys.
func (c cpuShare) perBuy() (time.Duration, bool) {
	if c.accepted <= 0 {
		return 0, false
	}
	return time.Duration(float64(c.gateway()) / c.accepted), true
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

// profileAccepted takes the CPU profile of the accepted run from the crowd's
// first accepted buy (looked for from after on) for seconds, keeps
// it at path, and counts the accepted buys the gateway's metrics saw in the
// same window.
func profileAccepted(ctx context.Context, base, path string, after time.Duration, seconds int) (cpuShare, error) {
	select {
	case <-time.After(after):
	case <-ctx.Done():
		return cpuShare{}, ctx.Err()
	}
	// On a busy machine the tool's preparation can outlast -open-in, and
	// a window opened at a fixed moment would see no buy: wait for the
	// crowd's first accepted buy.
	var before float64
	for deadline := time.Now().Add(2 * time.Minute); ; {
		n, err := acceptedCount(ctx, base)
		if err != nil {
			return cpuShare{}, err
		}
		if n > 0 {
			before = n
			break
		}
		if time.Now().After(deadline) {
			return cpuShare{}, errors.New("no accepted buy within 2 minutes of the run's start")
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return cpuShare{}, ctx.Err()
		}
	}
	if err := takeProfile(ctx, base, path, 0, seconds); err != nil {
		return cpuShare{}, err
	}
	after2, err := acceptedCount(ctx, base)
	if err != nil {
		return cpuShare{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return cpuShare{}, err
	}
	defer f.Close()
	by, err := splitProfile(f)
	if err != nil {
		return cpuShare{}, fmt.Errorf("%s: %w", path, err)
	}
	if after2 <= before {
		return cpuShare{}, fmt.Errorf("no accepted buy during the %d s profile", seconds)
	}
	return cpuShare{window: time.Duration(seconds) * time.Second, byRole: by, accepted: after2 - before}, nil
}

// acceptedCount reads seckill_buy_outcomes_total{outcome="accepted"}.
func acceptedCount(ctx context.Context, base string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f, ok := fams["seckill_buy_outcomes_total"]
	if !ok {
		return 0, nil
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "accepted" {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, nil
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

// moduleRoot is the folder of go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s: run deploy/bench from the repository", dir)
		}
		dir = parent
	}
}
