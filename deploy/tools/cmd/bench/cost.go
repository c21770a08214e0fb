package main

// The cost table of make bench: what one accepted buy and one sold-out
// answer cost each service, from the services' own counters read before and
// after each crowd (deploy/devstack/cost), the process's Kafka counters and the
// profile's split by role; beside the targets, and beside a saved run's.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// Targets of the cost table (deploy/tools/bench/README.md), per answer.
const (
	targetRedisCommandsPerBuy = 8.0
	targetRedisCPUPerBuy      = 25 * time.Microsecond
	targetGatewayCPUPerBuy    = 80 * time.Microsecond
	// targetFromMemory is the share of the sold-out run's answers that
	// never reached reserve.lua: once the sold-out flag is set, none does,
	// so what is left is the answers sent before it was.
	targetFromMemory = 0.99
)

// services are the counters of the system under test: its Redis and
// PostgreSQL (from dev mode's dev.env) and its ops listener's /metrics.
type services struct {
	rdb     redis.UniversalClient
	pgURL   string
	metrics string
}

// dialServices reads the dev.env of the dev process's data folder.
func dialServices(dataDir, metrics string) (*services, error) {
	vars, err := devstack.ReadEnvFile(dataDir)
	if err != nil {
		return nil, err
	}
	s := &services{pgURL: vars["SECKILL_DATABASE_URL"], metrics: metrics}
	switch {
	case vars["SECKILL_REDIS_CLUSTER_ADDRS"] != "":
		s.rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(vars["SECKILL_REDIS_CLUSTER_ADDRS"], ",")})
	case vars["SECKILL_REDIS_URL"] != "":
		opt, err := redis.ParseURL(vars["SECKILL_REDIS_URL"])
		if err != nil {
			return nil, fmt.Errorf("dev.env: SECKILL_REDIS_URL: %w", err)
		}
		s.rdb = redis.NewClient(opt)
	default:
		return nil, fmt.Errorf("%s/%s names no Redis", dataDir, devstack.EnvFile)
	}
	if s.pgURL == "" {
		s.rdb.Close()
		return nil, fmt.Errorf("%s/%s names no PostgreSQL", dataDir, devstack.EnvFile)
	}
	return s, nil
}

func (s *services) close() { _ = s.rdb.Close() }

// counters are the services' counters at one moment.
type counters struct {
	redis                 cost.Redis
	pg                    cost.Postgres
	kafkaMsgs, kafkaBytes float64
	workerTxs             float64 // the workers' PostgreSQL transactions
	reserveCalls          float64 // the process's calls of reserve.lua
}

func (s *services) read(ctx context.Context) (counters, error) {
	var c counters
	var err error
	if c.redis, err = cost.ReadRedis(ctx, s.rdb); err != nil {
		return c, err
	}
	if c.pg, err = cost.ReadPostgres(ctx, s.pgURL); err != nil {
		return c, err
	}
	c.kafkaMsgs, c.kafkaBytes, c.workerTxs, c.reserveCalls, err = processCounters(ctx, s.metrics)
	return c, err
}

// costProbe reads the services' counters once a crowd's answers are all
// in and PostgreSQL has published its counts, while the load tool pauses
// before its own reads (-pause-before-checks, which checkPause gives): what
// it reads is the crowd's cost, the checks' left out.
type costProbe struct {
	done chan probeResult
}

type probeResult struct {
	c   counters
	err error
}

// probePoll is how often the probe reads /metrics during a crowd: each
// read costs the gateway an exposition (about a millisecond, gzipped), which
// the profile counts as the gateway's, so not often; the load tool's pause
// leaves it ample time to see the last answer.
const probePoll = 250 * time.Millisecond

// checkPause is the load tool's pause before its checks: the settle time
// and a margin for the last orders to be persisted and the counters read.
func checkPause(settle time.Duration) time.Duration { return settle + 5*time.Second }

// startCostProbe counts the buy answers before the crowd (call it before
// starting the load tool), then in the background waits for answers more,
// then settle, and reads the counters.
func startCostProbe(ctx context.Context, s *services, answers int, settle time.Duration) (*costProbe, error) {
	from, err := buyAnswers(ctx, s.metrics, outcomeAny)
	if err != nil {
		return nil, fmt.Errorf("cost table: %w", err)
	}
	p := &costProbe{done: make(chan probeResult, 1)}
	go func() {
		c, err := p.take(ctx, s, from+float64(answers), settle)
		p.done <- probeResult{c, err}
	}()
	return p, nil
}

func (p *costProbe) take(ctx context.Context, s *services, want float64, settle time.Duration) (counters, error) {
	count := func(ctx context.Context) (float64, error) { return buyAnswers(ctx, s.metrics, outcomeAny) }
	if _, err := awaitRise(ctx, count, want-1, 5*time.Minute, probePoll); err != nil {
		return counters{}, fmt.Errorf("cost table: the crowd's last answer: %w", err)
	}
	return settledRead(ctx, s, settle)
}

// wait returns the counters read after the crowd.
func (p *costProbe) wait() (counters, error) {
	r := <-p.done
	return r.c, r.err
}

// settledRead waits settle (PostgreSQL publishes an idle backend's counts
// within ten seconds), then reads the counters.
func settledRead(ctx context.Context, s *services, settle time.Duration) (counters, error) {
	select {
	case <-ctx.Done():
		return counters{}, ctx.Err()
	case <-time.After(settle):
	}
	c, err := s.read(ctx)
	if err != nil {
		return c, fmt.Errorf("cost table: %w", err)
	}
	return c, nil
}

// processCounters reads the process's own counters from its /metrics: the
// messages its producer had acknowledged and their bytes, the workers'
// PostgreSQL transactions, and the calls of reserve.lua.
func processCounters(ctx context.Context, metrics string) (msgs, bytes, txs, reserves float64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metrics+"/metrics", nil)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer resp.Body.Close()
	return processCountersFrom(resp.Body)
}

// processCountersFrom reads a Prometheus text exposition: the produce
// count less its errors, the bytes acknowledged, the workers' transactions
// and the reserve.lua calls.
func processCountersFrom(r io.Reader) (msgs, bytes, txs, reserves float64, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	// first is the series of name whose labels include label=value (any
	// series when label is "").
	first := func(name, label, value string) float64 {
		f, ok := fams[name]
		if !ok {
			return 0
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if !match {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
		return 0
	}
	return first("seckill_kafka_produce_duration_seconds", "", "") - first("seckill_kafka_produce_errors_total", "", ""),
		first("seckill_kafka_produced_bytes_total", "", ""), first("seckill_persist_duration_seconds", "", ""),
		first("seckill_redis_script_duration_seconds", "script", "reserve"), nil
}

// runCost is what one crowd cost, per answer counted (accepted buys in the
// accepted run, every answer in the sold-out run). It is the bench JSON's
// shape, so a saved run can be compared with a new one.
type runCost struct {
	Answers  float64 `json:"answers"`
	Accepted float64 `json:"accepted"` // accepted buys among the answers
	// RedisCommands counts every command, a script's own included, and
	// RedisByCommand splits them; RedisScripts is the EVALSHA calls.
	RedisCommands  float64            `json:"redis_commands"`
	RedisScripts   float64            `json:"redis_scripts"`
	RedisByCommand map[string]float64 `json:"redis_by_command"`
	// RedisPerSoldOut is the Redis commands per answer that was not an
	// accepted buy, the buys costed at the accepted run's figure (the
	// sold-out run only).
	RedisPerSoldOut *float64 `json:"redis_per_sold_out,omitempty"`
	// ReserveCalls is the calls of reserve.lua per answer, from the
	// process's own count.
	ReserveCalls   float64 `json:"reserve_calls"`
	RedisCPUMicros float64 `json:"redis_cpu_us"`
	// RedisScriptMicros is the time Redis measured around scripts (wall
	// clock: on a busy machine, waits for a core included).
	RedisScriptMicros float64 `json:"redis_script_us"`
	PGXacts           float64 `json:"pg_transactions"`
	WorkerTxs         float64 `json:"worker_transactions"`
	PGRowsWritten     float64 `json:"pg_rows_written"`
	PGWALBytes        float64 `json:"pg_wal_bytes"`
	KafkaMessages     float64 `json:"kafka_messages"`
	KafkaBytes        float64 `json:"kafka_bytes"`
	// CPU of the process by role, from the crowd's profile (absent when
	// it was not taken).
	GatewayCPUMicros *float64 `json:"gateway_cpu_us,omitempty"`
	WorkerCPUMicros  *float64 `json:"worker_cpu_us,omitempty"`
	BrokerCPUMicros  *float64 `json:"broker_cpu_us,omitempty"`
}

// costOf divides what happened between before and after by answers.
func costOf(before, after counters, answers, accepted float64, share cpuShare) runCost {
	c := runCost{Answers: answers, Accepted: accepted, RedisByCommand: map[string]float64{}}
	if answers <= 0 {
		return c
	}
	r := after.redis.Sub(before.redis)
	for name, cmd := range r.Commands {
		if name != "info" {
			c.RedisByCommand[name] = float64(cmd.Calls) / answers
		}
	}
	c.RedisCommands = float64(r.Total()) / answers
	c.RedisScripts = float64(r.Scripts()) / answers
	c.RedisCPUMicros = micros(r.CPU) / answers
	c.RedisScriptMicros = micros(r.ScriptTime()) / answers
	pg := after.pg.Sub(before.pg)
	c.PGXacts, c.PGRowsWritten, c.PGWALBytes = float64(pg.Xacts)/answers, float64(pg.RowsWritten)/answers, float64(pg.WALBytes)/answers
	c.ReserveCalls = (after.reserveCalls - before.reserveCalls) / answers
	c.WorkerTxs = (after.workerTxs - before.workerTxs) / answers
	c.KafkaMessages = (after.kafkaMsgs - before.kafkaMsgs) / answers
	c.KafkaBytes = (after.kafkaBytes - before.kafkaBytes) / answers
	if share.answers > 0 {
		per := func(role string) *float64 {
			v := micros(share.byRole[role]) / share.answers
			return &v
		}
		c.GatewayCPUMicros, c.WorkerCPUMicros, c.BrokerCPUMicros = per(""), per("worker"), per("broker")
	}
	return c
}

// setSoldOutNet sets the sold-out run's Redis commands per answer that was
// not a buy, its accepted buys costed at the accepted run's figure.
func (c *runCost) setSoldOutNet(acceptedRun runCost) {
	rest := c.Answers - c.Accepted
	if rest <= 0 {
		return
	}
	v := max(0, (c.RedisCommands*c.Answers-c.Accepted*acceptedRun.RedisCommands)/rest)
	c.RedisPerSoldOut = &v
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// benchRecord is the bench's JSON (-out), read back by -compare.
type benchRecord struct {
	At           time.Time `json:"at"`
	Accepted     runCost   `json:"accepted"`
	SoldOut      runCost   `json:"sold_out"`
	AllocsPerBuy *int      `json:"allocs_per_buy,omitempty"`
	// HealthzCPUMicros is the gateway's CPU per request of GET /healthz
	// during its ceiling: the floor under an answer's.
	HealthzCPUMicros *float64 `json:"healthz_gateway_cpu_us,omitempty"`
	// The figures that must not get worse, ratios to this run's ceilings.
	AcceptedShare float64 `json:"accepted_share_of_evalsha"`
	SoldOutShare  float64 `json:"sold_out_share_of_healthz"`
	AcceptedP99MS float64 `json:"accepted_p99_ms"`
	SoldOutP99MS  float64 `json:"sold_out_p99_ms"`
	PersistP99MS  float64 `json:"created_p99_ms"`
}

func newRecord(res results) benchRecord {
	r := benchRecord{At: time.Now().UTC(), Accepted: res.acceptedCost, SoldOut: res.soldOutCost,
		AcceptedP99MS: res.accepted.Latency["all"].P99MS, SoldOutP99MS: res.soldOut.Latency["all"].P99MS,
		PersistP99MS: res.accepted.Persist.Delay.P99MS}
	if res.evalsha > 0 {
		r.AcceptedShare = rate(res.accepted, loadtest.OutcomeAccepted) / res.evalsha
	}
	if res.trivial.RequestsPerSecond > 0 {
		r.SoldOutShare = res.soldOut.RequestsPerSecond / res.trivial.RequestsPerSecond
	}
	if res.allocsErr == "" {
		r.AllocsPerBuy = &res.allocs
	}
	if per, ok := res.healthzCPU.share.perBuy(); ok {
		v := micros(per)
		r.HealthzCPUMicros = &v
	}
	return r
}

func writeRecord(path string, r benchRecord) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readRecord(path string) (*benchRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r benchRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// costLine is one line of the cost table: a figure of each run, how to
// print it, and the target of the accepted buy (or of the sold-out
// answer) with its verdict.
type costLine struct {
	name     string
	get      func(runCost) *float64
	unit     string // printed after the figure
	digits   int
	target   string
	met      func(acc, so runCost) bool // nil: reported, no target
	indented bool
}

func val(v float64) *float64 { return &v }

// fromMemory is the share of a run's answers that did not call reserve.lua
// (the sold-out flag's, from memory).
func fromMemory(c runCost) *float64 {
	if c.Answers <= 0 {
		return nil
	}
	return val(max(0, 1-c.ReserveCalls))
}

func costLines(acc, so runCost, saved *benchRecord) []costLine {
	lines := []costLine{
		{name: "Redis commands (a script's own included)", get: func(c runCost) *float64 { return val(c.RedisCommands) }, digits: 1,
			target: fmt.Sprintf("≤ %.0f", targetRedisCommandsPerBuy),
			met:    func(acc, _ runCost) bool { return acc.RedisCommands <= targetRedisCommandsPerBuy }},
		{name: "Redis commands per sold-out answer, buys set aside", get: func(c runCost) *float64 { return c.RedisPerSoldOut }, digits: 3},
		{name: "answers that never reached reserve.lua", get: fromMemory, unit: "", digits: 4,
			target: fmt.Sprintf("sold out: ≥ %.2f", targetFromMemory),
			met: func(_, so runCost) bool {
				v := fromMemory(so)
				return v != nil && *v >= targetFromMemory
			}},
		{name: "script calls (EVALSHA)", get: func(c runCost) *float64 { return val(c.RedisScripts) }, digits: 2, indented: true},
	}
	// Every command either run (or the saved one) used, most used first.
	names := map[string]bool{}
	for _, c := range []runCost{acc, so} {
		for n := range c.RedisByCommand {
			names[n] = true
		}
	}
	if saved != nil {
		for _, c := range []runCost{saved.Accepted, saved.SoldOut} {
			for n := range c.RedisByCommand {
				names[n] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.SortFunc(sorted, func(a, b string) int {
		return cmp.Or(cmp.Compare(acc.RedisByCommand[b]+so.RedisByCommand[b], acc.RedisByCommand[a]+so.RedisByCommand[a]), cmp.Compare(a, b))
	})
	for _, n := range sorted {
		lines = append(lines, costLine{name: strings.ToUpper(n), digits: 3, indented: true,
			get: func(c runCost) *float64 { return val(c.RedisByCommand[n]) }})
	}
	return append(lines,
		costLine{name: "Redis CPU (used_cpu_sys + used_cpu_user)", get: func(c runCost) *float64 { return val(c.RedisCPUMicros) }, unit: " µs", digits: 1,
			target: fmt.Sprintf("≤ %s", fmtMicros(targetRedisCPUPerBuy)),
			met:    func(acc, _ runCost) bool { return acc.RedisCPUMicros <= micros(targetRedisCPUPerBuy) }},
		costLine{name: "in scripts, wall clock (commandstats usec)", get: func(c runCost) *float64 { return val(c.RedisScriptMicros) }, unit: " µs", digits: 1, indented: true},
		costLine{name: "PostgreSQL transactions (pg_stat_database)", get: func(c runCost) *float64 { return val(c.PGXacts) }, digits: 3},
		costLine{name: "of which the workers' batches", get: func(c runCost) *float64 { return val(c.WorkerTxs) }, digits: 3, indented: true},
		costLine{name: "PostgreSQL rows written", get: func(c runCost) *float64 { return val(c.PGRowsWritten) }, digits: 2},
		costLine{name: "PostgreSQL WAL", get: func(c runCost) *float64 { return val(c.PGWALBytes) }, unit: " B", digits: 0},
		costLine{name: "Kafka messages produced", get: func(c runCost) *float64 { return val(c.KafkaMessages) }, digits: 3},
		costLine{name: "Kafka bytes produced (key and value)", get: func(c runCost) *float64 { return val(c.KafkaBytes) }, unit: " B", digits: 0},
		costLine{name: "gateway CPU (profile, no role label)", get: func(c runCost) *float64 { return c.GatewayCPUMicros }, unit: " µs", digits: 1,
			target: fmt.Sprintf("≤ %s", fmtMicros(targetGatewayCPUPerBuy)),
			met: func(acc, _ runCost) bool {
				return acc.GatewayCPUMicros != nil && *acc.GatewayCPUMicros <= micros(targetGatewayCPUPerBuy)
			}},
		costLine{name: "workers' CPU (role=worker)", get: func(c runCost) *float64 { return c.WorkerCPUMicros }, unit: " µs", digits: 1},
		costLine{name: "broker's CPU (role=broker)", get: func(c runCost) *float64 { return c.BrokerCPUMicros }, unit: " µs", digits: 1},
	)
}

// printCost writes the cost table: each figure per accepted buy and per
// sold-out answer, with the saved run's beside it when there is one.
func printCost(w io.Writer, rec benchRecord, saved *benchRecord) {
	acc, so := rec.Accepted, rec.SoldOut
	fmt.Fprintf(w, "\ncost table: per accepted buy (%.0f in the accepted run) and per answer of the sold-out run (%.0f, %.0f of them buys)\n",
		acc.Answers, so.Answers, so.Accepted)
	if saved != nil {
		fmt.Fprintf(w, "beside the saved run of %s (was → now); CPU moves ±20 %% between runs on a shared machine, counts do not\n",
			saved.At.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "cost\taccepted buy\tsold-out answer\ttarget\tverdict")
	for _, l := range costLines(acc, so, saved) {
		name := l.name
		if l.indented {
			name = "  " + name
		}
		cell := func(now runCost, was *runCost) string {
			s := fmtCost(l.get(now), l.digits, l.unit)
			if was != nil {
				s = fmtCost(l.get(*was), l.digits, l.unit) + " → " + s + change(l.get(*was), l.get(now))
			}
			return s
		}
		var wasAcc, wasSo *runCost
		if saved != nil {
			wasAcc, wasSo = &saved.Accepted, &saved.SoldOut
		}
		verdict := ""
		if l.met != nil {
			verdict = "MISSED"
			if l.met(acc, so) {
				verdict = "MET"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, cell(acc, wasAcc), cell(so, wasSo), l.target, verdict)
	}
	allocs := "not measured"
	if rec.AllocsPerBuy != nil {
		allocs = fmt.Sprint(*rec.AllocsPerBuy)
		if saved != nil && saved.AllocsPerBuy != nil {
			allocs = fmt.Sprintf("%d → %s", *saved.AllocsPerBuy, allocs)
		}
	}
	verdict := "MISSED"
	if rec.AllocsPerBuy != nil && *rec.AllocsPerBuy <= targetAllocsPerBuy {
		verdict = "MET"
	}
	fmt.Fprintf(tw, "allocations (BenchmarkHandlerBuy)\t%s\t\t≤ %d\t%s\n", allocs, targetAllocsPerBuy, verdict)
	_ = tw.Flush()
	if rec.HealthzCPUMicros != nil || (saved != nil && saved.HealthzCPUMicros != nil) {
		floor := fmtCost(rec.HealthzCPUMicros, 1, " µs")
		if saved != nil {
			floor = fmtCost(saved.HealthzCPUMicros, 1, " µs") + " → " + floor + change(saved.HealthzCPUMicros, rec.HealthzCPUMicros)
		}
		fmt.Fprintf(w, "\nthe floor: gateway CPU per GET /healthz request during its ceiling, %s\n", floor)
	}
	if saved != nil {
		fmt.Fprintf(w, "\nfigures that must not get worse (was → now): accepted/s ÷ EVALSHA/s %.0f%% → %.0f%%, sold-out/s ÷ /healthz %.0f%% → %.0f%%, "+
			"p99 accepted %.1f → %.1f ms, sold-out %.1f → %.1f ms, 202 → created %.0f → %.0f ms\n",
			100*saved.AcceptedShare, 100*rec.AcceptedShare, 100*saved.SoldOutShare, 100*rec.SoldOutShare,
			saved.AcceptedP99MS, rec.AcceptedP99MS, saved.SoldOutP99MS, rec.SoldOutP99MS, saved.PersistP99MS, rec.PersistP99MS)
	}
}

func fmtCost(v *float64, digits int, unit string) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.*f%s", digits, *v, unit)
}

// change is the relative change from was to now, " (−67%)".
func change(was, now *float64) string {
	if was == nil || now == nil || *was == 0 {
		return ""
	}
	return fmt.Sprintf(" (%+.0f%%)", 100*(*now-*was)/(*was))
}
