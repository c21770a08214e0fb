package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CeilingReport is what a ceiling run measured: how fast the system answers
// a trivial route (GET /healthz by default) with the crowd's own shape: the
// same HTTP client, the same number of warm connections, each worker sending
// its next request when the last one is answered. It is the yardstick of the
// buying path's answers per second on the same machine (make bench).
type CeilingReport struct {
	URL string `json:"url"`
	// URLs are every gateway's, when the workers were spread over several
	// (each worker keeps to one).
	URLs              []string     `json:"urls,omitempty"`
	Concurrency       int          `json:"concurrency"`
	Requests          int          `json:"requests"`
	Errors            int          `json:"errors"`
	ElapsedMS         float64      `json:"elapsed_ms"`
	RequestsPerSecond float64      `json:"requests_per_second"`
	Latency           LatencyStats `json:"latency"`
}

// RunCeiling loads cfg.Ceiling on cfg.BaseURL (or on each of cfg.Targets, the
// workers spread over them) with cfg.Concurrency workers
// for cfg.Duration (each worker at least one request) and reports the rate
// of 2xx answers. The report goes to
// stdout as JSON with cfg.JSON, as one line otherwise.
func RunCeiling(ctx context.Context, cfg Config, stdout io.Writer) (CeilingReport, error) {
	if err := cfg.Validate(); err != nil {
		return CeilingReport{}, err
	}
	bases := cfg.bases()
	rep := CeilingReport{URL: bases[0] + cfg.Ceiling, Concurrency: cfg.Concurrency}
	url := rep.URL // what the messages name
	if len(bases) > 1 {
		for _, b := range bases {
			rep.URLs = append(rep.URLs, b+cfg.Ceiling)
		}
		url = strings.Join(rep.URLs, ",")
	}
	tr := newTransport(cfg.Concurrency)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}

	var (
		mu      sync.Mutex
		all     []time.Duration
		errs    int
		wg      sync.WaitGroup
		ready   sync.WaitGroup
		release = make(chan struct{})
	)
	ready.Add(cfg.Concurrency)
	var start time.Time
	for w := range cfg.Concurrency {
		target := bases[w%len(bases)] + cfg.Ceiling // each worker keeps to one gateway
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1<<14)
			bad := 0
			get := func() error {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
				if err != nil {
					return err
				}
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) {
					err = fmt.Errorf("HTTP %d", resp.StatusCode)
				}
				return err
			}
			// One request to open this worker's connection before the clock
			// starts, like the crowd's warm connections.
			_ = get()
			ready.Done()
			<-release
			stopAt := start.Add(cfg.Duration)
			// Every worker makes at least one timed request, so a machine
			// too busy to start the workers within Duration still measures
			// something instead of reporting nothing.
			for first := true; ctx.Err() == nil; first = false {
				t0 := time.Now()
				if !first && !t0.Before(stopAt) {
					break
				}
				if err := get(); err != nil {
					bad++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			errs += bad
			mu.Unlock()
		})
	}
	ready.Wait()
	start = time.Now()
	close(release)
	wg.Wait()
	elapsed := time.Since(start)

	rep.Requests, rep.Errors = len(all)+errs, errs
	rep.ElapsedMS = ms(elapsed)
	rep.RequestsPerSecond = float64(len(all)) / elapsed.Seconds()
	rep.Latency = latencyStats(all)
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return rep, fmt.Errorf("json report: %w", err)
		}
	} else {
		fmt.Fprintf(stdout, "ceiling %s: %d requests in %s on %d connections: %.0f/s, p50 %s p99 %s max %s ms, %d errors\n",
			url, rep.Requests, elapsed.Round(time.Millisecond), rep.Concurrency, rep.RequestsPerSecond,
			fmtMS(rep.Latency.P50MS), fmtMS(rep.Latency.P99MS), fmtMS(rep.Latency.MaxMS), rep.Errors)
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if len(all) == 0 {
		return rep, fmt.Errorf("loadtest: ceiling: no request to %s succeeded (%d errors)", url, errs)
	}
	return rep, nil
}
