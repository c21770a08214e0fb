package main

// The broker comparison of make bench: the accepted path of `seckill dev`
// on its in-process broker, on one Apache Kafka node and on three (RF 3,
// min.insync.replicas 2), each process's CPU per accepted buy read from
// /proc before and after the crowd, the JVMs' included; then the producer
// alone against the three nodes with a few settings.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/devstack/cost"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
	"github.com/flashsale/seckill/orders/kafkaq"
)

// brokerTopic is dev mode's orders topic; the Apache cluster gets it and its
// dead-letter topic made, as auto-creation is off there.
const brokerTopic = "seckill.orders"

// brokerRun is the accepted crowd on one dev process: on one broker, or
// (wait.go) with one setting of SECKILL_REDIS_WAIT_REPLICAS.
type brokerRun struct {
	name    string
	rep     loadtest.Report
	cpu     map[string]time.Duration // per process over the crowd
	accept  float64                  // accepted buys the gateway counted meanwhile
	produce histogram                // the produce waits meanwhile
	redis   cost.Redis               // what dev's Redis did meanwhile (INFO commandstats, cpu)
	loadavg string                   // the machine's load average as the crowd started
}

// runBrokers runs the accepted crowd of o.brokerShoppers on each broker of
// o.brokers ("inproc", "apache-1", "apache-3"), then the producer settings
// against three nodes when o.producerSettings, and prints both tables.
func runBrokers(ctx context.Context, o options, bin string, env []string, work string) error {
	var runs []brokerRun
	var settings []settingRun
	for _, name := range strings.Split(o.brokers, ",") {
		name = strings.TrimSpace(name)
		nodes := 0
		switch name {
		case "":
			continue
		case "inproc":
		case "apache-1":
			nodes = 1
		case "apache-3":
			nodes = 3
		default:
			return fmt.Errorf("-brokers: %q is none of inproc, apache-1, apache-3", name)
		}
		r, s, err := brokerCrowd(ctx, o, bin, env, filepath.Join(work, name), name, nodes)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		runs = append(runs, r)
		settings = append(settings, s...)
	}
	writeBrokers(os.Stdout, o, runs)
	if len(settings) > 0 {
		writeSettings(os.Stdout, settings)
	}
	return nil
}

// brokerCrowd starts the broker (none for the in-process one), runs the
// accepted crowd on a dev process on it, then, with three nodes, the
// producer settings once that process has stopped.
func brokerCrowd(ctx context.Context, o options, bin string, env []string, dir, name string, nodes int) (brokerRun, []settingRun, error) {
	var hooks devHooks
	env = slices.Clone(env)
	var k *devstack.ApacheKafka
	if nodes > 0 {
		fmt.Fprintf(os.Stderr, "bench: starting Apache Kafka, %d node(s)\n", nodes)
		var err error
		k, err = devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{
			Brokers: nodes, Dir: filepath.Join(dir, "kafka"),
			Topics:        map[string]int32{brokerTopic: 6, brokerTopic + kafkaq.DeadLetterSuffix: 1},
			ProductionJVM: o.productionJVM,
		})
		if err != nil {
			return brokerRun{name: name}, nil, err
		}
		defer k.Close()
		env = append(env, "SECKILL_KAFKA_BROKERS="+strings.Join(k.Brokers, ","))
		hooks.others = func() map[string]time.Duration { return map[string]time.Duration{"kafka JVMs": jvmCPU(k)} }
	}
	run, err := devCrowd(ctx, o, bin, env, dir, name, hooks)
	if err != nil {
		return run, nil, err
	}
	var settings []settingRun
	if o.producerSettings && nodes == 3 {
		// devCrowd has stopped the dev process: the producer alone gets
		// the machine.
		settings, err = producerSettings(ctx, k, o)
		if err != nil {
			return run, nil, err
		}
	}
	return run, settings, nil
}

// devHooks are what a caller of devCrowd adds to its run.
type devHooks struct {
	// ready runs once the dev process answers, before the warm-up crowd,
	// with a client of its Redis.
	ready func(ctx context.Context, rdb redis.UniversalClient) error
	// others is the CPU so far, by name, of processes the run counts that
	// are not the dev process's children.
	others func() map[string]time.Duration
}

// devCrowd starts a dev process on env in dir, warms it with a small
// crowd, then measures the accepted crowd of o.brokerShoppers, and stops
// it.
func devCrowd(ctx context.Context, o options, bin string, env []string, dir, name string, hooks devHooks) (brokerRun, error) {
	run := brokerRun{name: name}
	addr, err := freeAddr()
	if err != nil {
		return run, err
	}
	base := "http://" + addr
	opsAddr, err := freeAddr()
	if err != nil {
		return run, err
	}
	metrics := "http://" + opsAddr // the ops listener: the gateway's port serves no /metrics
	dataDir := filepath.Join(dir, "data")
	env = append(slices.Clone(env), "SECKILL_HTTP_ADDR="+addr, "SECKILL_OPS_ADDR="+opsAddr, "SECKILL_LOADTEST_URL="+base,
		"SECKILL_DATA_DIR="+dataDir)
	logPath := filepath.Join(dir, "seckill.log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, err
	}
	stopDev, pid, err := startDev(ctx, bin, env, logPath)
	if err != nil {
		return run, err
	}
	defer stopDev()
	if err := waitReady(ctx, base, 2*time.Minute); err != nil {
		return run, fmt.Errorf("%w; the log says:\n%s", err, tail(logPath, 30))
	}
	svc, err := dialServices(dataDir, metrics)
	if err != nil {
		return run, err
	}
	defer svc.close()
	if hooks.ready != nil {
		if err := hooks.ready(ctx, svc.rdb); err != nil {
			return run, err
		}
	}
	crowd := func(shoppers, firstUser int, rep *loadtest.Report) error {
		args := []string{"sale", "-shoppers", strconv.Itoa(shoppers), "-attempts", "1",
			"-stock", strconv.Itoa(shoppers * 2), "-limit", "1", "-first-user", strconv.Itoa(firstUser),
			"-json", "-no-progress", "-concurrency", strconv.Itoa(o.concurrency), "-replay", "0",
			"-open-in", "2s", "-persist-wait", "60s", "-qty", "1"}
		return loadtestRun(ctx, o.tool, env, args, rep)
	}
	fmt.Fprintf(os.Stderr, "bench: %s: warm-up crowd of %d, then %d shoppers\n", name, o.brokerShoppers/4, o.brokerShoppers)
	var warm loadtest.Report
	if err := crowd(o.brokerShoppers/4, 30_000_000, &warm); err != nil {
		return run, err
	}
	acc0, h0, err := gatewayFigures(ctx, metrics)
	if err != nil {
		return run, err
	}
	r0, err := cost.ReadRedis(ctx, svc.rdb)
	if err != nil {
		return run, err
	}
	cpu0 := devCPU(pid, hooks.others)
	run.loadavg = loadavg()
	if err := crowd(o.brokerShoppers, 40_000_000, &run.rep); err != nil {
		return run, err
	}
	cpu1 := devCPU(pid, hooks.others)
	r1, err := cost.ReadRedis(ctx, svc.rdb)
	if err != nil {
		return run, err
	}
	acc1, h1, err := gatewayFigures(ctx, metrics)
	if err != nil {
		return run, err
	}
	run.accept, run.produce, run.redis = acc1-acc0, h1.sub(h0), r1.Sub(r0)
	run.cpu = map[string]time.Duration{}
	for p, t := range cpu1 {
		run.cpu[p] = t - cpu0[p]
	}
	if !run.rep.Passed {
		return run, fmt.Errorf("the load test's invariant checks failed on %s", name)
	}
	return run, nil
}

// devCPU is the CPU time so far of the dev process (the gateway, the
// workers and, without Apache Kafka, the in-process broker), of each of its
// children (redis-server, the postmaster with its backends) and of the
// processes others names (nil: none).
func devCPU(pid int, others func() map[string]time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{"seckill dev": procCPU(pid, false)}
	for _, kid := range devstack.ChildrenOf(pid) {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(kid) + "/comm")
		out[strings.TrimSpace(string(comm))] += procCPU(kid, true)
	}
	if others != nil {
		for name, t := range others() {
			out[name] += t
		}
	}
	return out
}

// histogram is a Prometheus histogram's cumulative buckets.
type histogram struct {
	sum, count float64
	upper      []float64
	cum        []float64
}

func (h histogram) sub(o histogram) histogram {
	d := histogram{sum: h.sum - o.sum, count: h.count - o.count, upper: h.upper, cum: slices.Clone(h.cum)}
	for i := range d.cum {
		if i < len(o.cum) {
			d.cum[i] -= o.cum[i]
		}
	}
	return d
}

// quantile is the upper bound of the bucket where quantile q falls.
func (h histogram) quantile(q float64) float64 {
	for i, c := range h.cum {
		if c >= q*h.count {
			return h.upper[i]
		}
	}
	return -1
}

// gatewayFigures reads the accepted buys and the produce waits from the
// /metrics of the ops listener at base.
func gatewayFigures(ctx context.Context, base string) (float64, histogram, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, histogram{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, histogram{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, histogram{}, err
	}
	accepted, err := countOutcomes(strings.NewReader(string(body)), outcomeAccepted)
	if err != nil {
		return 0, histogram{}, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return 0, histogram{}, err
	}
	var h histogram
	if f, ok := fams["seckill_kafka_produce_duration_seconds"]; ok && len(f.GetMetric()) > 0 {
		ph := f.GetMetric()[0].GetHistogram()
		h.sum, h.count = ph.GetSampleSum(), float64(ph.GetSampleCount())
		for _, b := range ph.GetBucket() {
			h.upper = append(h.upper, b.GetUpperBound())
			h.cum = append(h.cum, float64(b.GetCumulativeCount()))
		}
	}
	return accepted, h, nil
}

func writeBrokers(w io.Writer, o options, runs []brokerRun) {
	fmt.Fprintf(w, "\n### accepted path by broker (%d shoppers, %d in flight)\n\n", o.brokerShoppers, o.concurrency)
	fmt.Fprintln(w, "| broker | accepted/s | ÷ in-process | p99 | produce wait mean / p99 ≤ | CPU per accepted buy: seckill dev | redis | postgres | kafka JVMs | all |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var first float64
	for i, r := range runs {
		rate := rate(r.rep, loadtest.OutcomeAccepted)
		if i == 0 {
			first = rate
		}
		per := func(t time.Duration) string {
			if r.accept <= 0 {
				return "–"
			}
			return fmtMicros(time.Duration(float64(t) / r.accept))
		}
		var redis, pg, all time.Duration
		for p, t := range r.cpu {
			all += t
			switch {
			case strings.HasPrefix(p, "redis"):
				redis += t
			case strings.HasPrefix(p, "postgres"):
				pg += t
			}
		}
		wait := "–"
		if r.produce.count > 0 {
			wait = fmt.Sprintf("%.1f / %.0f ms", 1000*r.produce.sum/r.produce.count, 1000*r.produce.quantile(0.99))
		}
		jvm := "–"
		if t, ok := r.cpu["kafka JVMs"]; ok {
			jvm = per(t)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.1f ms | %s | %s | %s | %s | %s | %s |\n", r.name, rate, rate/first,
			r.rep.Latency["all"].P99MS, wait, per(r.cpu["seckill dev"]), per(redis), per(pg), jvm, per(all))
	}
	fmt.Fprintln(w, "\nseckill dev holds the gateway and the workers, and the in-process broker when there is no Apache Kafka; CPU from /proc/<pid>/stat before and after the crowd.")
	if o.productionJVM {
		fmt.Fprintln(w, "The Apache Kafka nodes ran with the JVM settings Kafka's scripts give a broker: -Xmx1G -Xms1G, G1 (MaxGCPauseMillis=20), the tiered compiler (-production-jvm).")
	} else {
		fmt.Fprintln(w, "The Apache Kafka nodes ran with the tests' JVM settings: -Xmx384m, SerialGC, the client compiler only (-production-jvm=false).")
	}
}

// setting is one producer configuration tried against the real broker.
type setting struct {
	key  string // what -producer-variants names it by
	name string
	set  func(*sarama.Config)
}

var producerVariants = []setting{
	{"shipped", "shipped (kafkaq.ProducerConfig)", func(*sarama.Config) {}},
	{"linger0", "no linger", func(c *sarama.Config) { c.Producer.Flush.Frequency = 0 }},
	{"linger1", "linger 1 ms", func(c *sarama.Config) { c.Producer.Flush.Frequency = time.Millisecond }},
	{"linger5", "linger 5 ms", func(c *sarama.Config) { c.Producer.Flush.Frequency = 5 * time.Millisecond }},
	{"bytes16k", "Flush.Bytes 16 KiB, linger 2 ms", func(c *sarama.Config) {
		c.Producer.Flush.Bytes, c.Producer.Flush.Frequency = 16<<10, 2*time.Millisecond
	}},
	{"lz4", "lz4", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionLZ4 }},
	{"snappy", "snappy", func(c *sarama.Config) { c.Producer.Compression = sarama.CompressionSnappy }},
}

// chosenVariants is the variants -producer-variants names, shipped first
// (the others' ratios are to it); "" is all of them.
func chosenVariants(keys string) ([]setting, error) {
	if keys == "" {
		return producerVariants, nil
	}
	out := []setting{producerVariants[0]}
	for _, k := range strings.Split(keys, ",") {
		k = strings.TrimSpace(k)
		i := slices.IndexFunc(producerVariants, func(v setting) bool { return v.key == k })
		switch {
		case i < 0:
			return nil, fmt.Errorf("-producer-variants: %q is not one of the variants (%s)", k, variantKeys())
		case i > 0 && !slices.ContainsFunc(out, func(v setting) bool { return v.key == k }):
			out = append(out, producerVariants[i])
		}
	}
	return out, nil
}

func variantKeys() string {
	keys := make([]string, len(producerVariants))
	for i, v := range producerVariants {
		keys[i] = v.key
	}
	return strings.Join(keys, ", ")
}

// settingRun is one round of one setting: publishes of inFlight callers
// each waiting for its own acknowledgement, as the gateway's buys do.
type settingRun struct {
	name     string
	round    int
	n        int
	elapsed  time.Duration
	p99      time.Duration
	jvmCPU   time.Duration
	ownCPU   time.Duration
	failures int
}

// producerSettings runs each variant for a few seconds against k, in
// rounds, the variants in turn: forwards in odd rounds and backwards in even
// ones, so that a machine getting busier or quieter during the run does not
// favour the variants that come first.
func producerSettings(ctx context.Context, k *devstack.ApacheKafka, o options) ([]settingRun, error) {
	variants, err := chosenVariants(o.producerVariants)
	if err != nil {
		return nil, err
	}
	var out []settingRun
	for round := 1; round <= o.producerRounds; round++ {
		for _, v := range inTurn(variants, round) {
			fmt.Fprintf(os.Stderr, "bench: producer %s, round %d\n", v.name, round)
			r, err := oneSetting(ctx, k, v, o.concurrency, 4*time.Second)
			if err != nil {
				return nil, fmt.Errorf("producer %s: %w", v.name, err)
			}
			r.round = round
			out = append(out, r)
		}
	}
	return out, nil
}

// inTurn is the order of items in round (from 1): as given in odd rounds,
// reversed in even ones, so that a machine getting busier or quieter
// during a comparison does not favour what comes first. items is left as
// it is.
func inTurn[T any](items []T, round int) []T {
	order := slices.Clone(items)
	if round%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

func oneSetting(ctx context.Context, k *devstack.ApacheKafka, v setting, inFlight int, d time.Duration) (settingRun, error) {
	cfg := kafkaq.ProducerConfig()
	v.set(cfg)
	p, err := sarama.NewAsyncProducer(k.Brokers, cfg)
	if err != nil {
		return settingRun{}, err
	}
	go func() {
		for {
			select {
			case m, ok := <-p.Successes():
				if !ok {
					return
				}
				m.Metadata.(chan error) <- nil
			case f, ok := <-p.Errors():
				if !ok {
					return
				}
				f.Msg.Metadata.(chan error) <- f.Err
			}
		}
	}()
	defer p.AsyncClose()
	// A reservation's size: its JSON is about this long.
	value := []byte(`{"order_id":1234567890123456789,"voucher_id":42,"user_id":40000001,"quantity":1,"request_key":"0123456789abcdef0123456789abcdef","reserved_at":"2026-12-02T15:00:00.123456789Z"}`)
	var (
		mu    sync.Mutex
		waits []time.Duration
		fails int
		wg    sync.WaitGroup
	)
	jvm0, own0 := jvmCPU(k), procCPU(os.Getpid(), false)
	began := time.Now()
	end := began.Add(d)
	for g := range inFlight {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				done := make(chan error, 1)
				t := time.Now()
				p.Input() <- &sarama.ProducerMessage{Topic: brokerTopic, Key: sarama.StringEncoder(strconv.Itoa(g*1_000_000 + i)),
					Value: sarama.ByteEncoder(value), Metadata: done}
				if err := <-done; err != nil {
					mu.Lock()
					fails++
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := settingRun{name: v.name, n: len(waits), elapsed: time.Since(began), failures: fails,
		jvmCPU: jvmCPU(k) - jvm0, ownCPU: procCPU(os.Getpid(), false) - own0}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	if len(waits) > 0 {
		r.p99 = waits[len(waits)*99/100]
	}
	return r, nil
}

func jvmCPU(k *devstack.ApacheKafka) time.Duration {
	var t time.Duration
	for i := range k.Brokers {
		t += procCPU(k.Pid(i), false)
	}
	return t
}

func writeSettings(w io.Writer, runs []settingRun) {
	fmt.Fprintln(w, "\n### the producer alone on 3 Apache Kafka nodes (acks=all, idempotent, MaxOpenRequests 1)")
	fmt.Fprintln(w, "\n| setting | round | acks/s | ÷ shipped, same round | p99 wait | kafka JVMs CPU per ack | producer CPU per ack | failed |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	rate := func(r settingRun) float64 { return float64(r.n) / r.elapsed.Seconds() }
	shipped := map[int]float64{}
	for _, r := range runs {
		if r.name == producerVariants[0].name {
			shipped[r.round] = rate(r)
		}
	}
	ratios := map[string][]float64{}
	var names []string
	for _, r := range runs {
		per := func(t time.Duration) string {
			if r.n == 0 {
				return "–"
			}
			return fmtMicros(t / time.Duration(r.n))
		}
		ratio := rate(r) / shipped[r.round]
		if _, seen := ratios[r.name]; !seen {
			names = append(names, r.name)
		}
		ratios[r.name] = append(ratios[r.name], ratio)
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.1f ms | %s | %s | %d |\n", r.name, r.round, rate(r), ratio,
			msOf(r.p99), per(r.jvmCPU), per(r.ownCPU), r.failures)
	}
	fmt.Fprintln(w, "\n| setting | ÷ shipped, each round | lowest | median |")
	fmt.Fprintln(w, "|---|---|---:|---:|")
	for _, name := range names {
		rs := ratios[name]
		each := make([]string, len(rs))
		for i, x := range rs {
			each[i] = fmt.Sprintf("%.2f", x)
		}
		sorted := slices.Sorted(slices.Values(rs))
		fmt.Fprintf(w, "| %s | %s | %.2f | %.2f |\n", name, strings.Join(each, ", "), sorted[0], sorted[len(sorted)/2])
	}
}
