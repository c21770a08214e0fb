package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/seckill/seckill/pause"
	"github.com/redis/go-redis/v9"
)

// EnvRedisURL is where the churn mode reads Redis's memory (the -redis flag
// wins); the same variable the server reads.
const EnvRedisURL = "SECKILL_REDIS_URL"

// ChurnReport is what a churn (soak) run measured: how many buy-then-cancel
// cycles the system took, and Redis's memory (INFO memory used_memory)
// before, during and after.
type ChurnReport struct {
	VoucherID string  `json:"voucher_id"`
	Shoppers  int     `json:"shoppers"`
	Workers   int     `json:"workers"`
	ElapsedS  float64 `json:"elapsed_s"`
	// Cycles counts buys that were accepted and then cancelled; per second
	// in CyclesPerSecond.
	Cycles          int64   `json:"cycles"`
	CyclesPerSecond float64 `json:"cycles_per_second"`
	// Refused counts buys not accepted (sold out while every unit was in a
	// cycle, rate limits, 503); Errors transport or unexpected answers.
	Refused int64 `json:"refused"`
	Errors  int64 `json:"errors"`
	// MemoryBefore is used_memory just before the churn, MemoryWarm after
	// its first quarter (the idempotency window filling up), MemoryAfter at
	// its end and MemoryPeak the largest sample (every second).
	MemoryBefore int64 `json:"memory_before"`
	MemoryWarm   int64 `json:"memory_warm"`
	MemoryAfter  int64 `json:"memory_after"`
	MemoryPeak   int64 `json:"memory_peak"`
	// Samples are used_memory once a second, for a chart.
	Samples []int64 `json:"samples"`
}

// RunChurn creates a seckill voucher and, for cfg.Churn, has cfg.Concurrency
// workers (over cfg.Shoppers shoppers, a fresh Idempotency-Key each time)
// buy one unit and cancel it as soon as the order exists, again and again
// (at most cfg.Rate cycles a second when set), while it samples Redis's used_memory every second. A system whose Redis
// state grows per request shows it here; one with bounded state stays flat
// once the idempotency window is full. Every cancel is a strike against its
// shopper (seckill/hoard): run the system with SECKILL_HOARD_LIMIT=0, or
// its shoppers are refused 403 after a few cycles.
func RunChurn(ctx context.Context, cfg Config, stdout io.Writer) (ChurnReport, error) {
	if err := cfg.Validate(); err != nil {
		return ChurnReport{}, err
	}
	if cfg.RedisURL == "" {
		return ChurnReport{}, fmt.Errorf("loadtest churn: needs -redis (or %s) to read Redis's memory", EnvRedisURL)
	}
	ropts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return ChurnReport{}, fmt.Errorf("loadtest: -redis: %w", err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	memory := func() (int64, error) {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return 0, fmt.Errorf("loadtest: redis INFO memory: %w", err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, errors.New("loadtest: redis INFO memory has no used_memory")
	}

	tr := newTransport(cfg.Concurrency)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: cfg.Timeout}
	api := &apiClient{base: strings.TrimRight(cfg.BaseURL, "/"), admin: cfg.AdminToken, http: client, secret: []byte(cfg.JWTSecret)}
	now := time.Now().UTC()
	v, err := api.createVoucher(ctx, newVoucher{
		Title: "loadtest churn", Kind: "seckill", PriceCents: cfg.PriceCents, Stock: cfg.Stock,
		PerUserLimit: cfg.PerUserLimit, BeginAt: now.Add(-time.Second), EndAt: now.Add(cfg.Churn + time.Hour),
	})
	if err != nil {
		return ChurnReport{}, err
	}
	tokens := make([]string, cfg.Shoppers)
	for i := range tokens {
		if tokens[i], err = mintToken(api.secret, cfg.FirstUserID+int64(i), now.Add(cfg.Churn+time.Hour)); err != nil {
			return ChurnReport{}, err
		}
	}
	rep := ChurnReport{VoucherID: v.ID, Shoppers: cfg.Shoppers, Workers: cfg.Concurrency}
	if rep.MemoryBefore, err = memory(); err != nil {
		return rep, err
	}

	run, stop := context.WithTimeout(ctx, cfg.Churn)
	defer stop()
	var cycles, refused, errs atomic.Int64
	var seq atomic.Int64
	buyPath := "/api/v1/vouchers/" + url.PathEscape(v.ID) + "/orders"
	post := func(path, token, key string, body any) (int, []byte, error) {
		hdr := map[string]string{"Authorization": "Bearer " + token}
		if key != "" {
			hdr["Idempotency-Key"] = key
		}
		return api.raw(run, http.MethodPost, path, hdr, body)
	}
	cycle := func(token string) {
		key := "churn-" + strconv.FormatInt(seq.Add(1), 36)
		status, body, err := post(buyPath, token, key, map[string]any{"quantity": 1})
		switch {
		case err != nil:
			if run.Err() == nil {
				errs.Add(1)
			}
			return
		case status != http.StatusAccepted:
			refused.Add(1)
			_ = pause.For(run, 20*time.Millisecond)
			return
		}
		var p struct {
			OrderID string `json:"order_id"`
		}
		if json.Unmarshal(body, &p) != nil || p.OrderID == "" {
			errs.Add(1)
			return
		}
		// The cancel succeeds once a worker persisted the order; until then
		// it is refused, and tried again shortly. The run's end does not
		// stop it: a hold left behind would be counted as growth.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(run), 30*time.Second)
		defer cancel()
		for cctx.Err() == nil {
			hdr := map[string]string{"Authorization": "Bearer " + token}
			status, _, err := api.raw(cctx, http.MethodPost, "/api/v1/orders/"+url.PathEscape(p.OrderID)+"/cancel", hdr, nil)
			if err == nil && status == http.StatusOK {
				cycles.Add(1)
				return
			}
			_ = pause.For(cctx, 10*time.Millisecond)
		}
		errs.Add(1)
	}

	// With -rate, cycles start at most that many per second, so memory
	// compares at one churn rate however busy the machine is.
	var pace <-chan time.Time
	if cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
		defer t.Stop()
		pace = t.C
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Go(func() {
			for i := w; run.Err() == nil; i += cfg.Concurrency {
				if pace != nil {
					select {
					case <-pace:
					case <-run.Done():
						return
					}
				}
				cycle(tokens[i%len(tokens)])
			}
		})
	}
	tick := time.NewTicker(time.Second)
	warmAt := start.Add(cfg.Churn / 4)
	for sampling := true; sampling; {
		select {
		case <-run.Done():
			sampling = false
		case <-tick.C:
			m, err := memory()
			if err != nil {
				continue
			}
			rep.Samples = append(rep.Samples, m)
			rep.MemoryPeak = max(rep.MemoryPeak, m)
			if rep.MemoryWarm == 0 && time.Now().After(warmAt) {
				rep.MemoryWarm = m
			}
		}
	}
	tick.Stop()
	wg.Wait()
	rep.ElapsedS = time.Since(start).Seconds()
	rep.Cycles, rep.Refused, rep.Errors = cycles.Load(), refused.Load(), errs.Load()
	rep.CyclesPerSecond = float64(rep.Cycles) / rep.ElapsedS
	if rep.MemoryAfter, err = memory(); err != nil {
		return rep, err
	}
	rep.MemoryPeak = max(rep.MemoryPeak, rep.MemoryAfter)
	if cfg.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return rep, enc.Encode(rep)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(stdout, "churn of voucher %s: %d buy-then-cancel cycles in %.0fs (%.0f/s) by %d workers over %d shoppers; %d buys refused, %d errors\n",
		rep.VoucherID, rep.Cycles, rep.ElapsedS, rep.CyclesPerSecond, rep.Workers, rep.Shoppers, rep.Refused, rep.Errors)
	fmt.Fprintf(stdout, "redis used_memory: before %s, after the first quarter %s, after %s, peak %s\n",
		mib(rep.MemoryBefore), mib(rep.MemoryWarm), mib(rep.MemoryAfter), mib(rep.MemoryPeak))
	return rep, nil
}

// raw sends one request and returns the status and body, whatever the status.
func (c *apiClient) raw(ctx context.Context, method, path string, header map[string]string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}
