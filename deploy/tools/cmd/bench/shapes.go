package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// shapesOptions size `make capacity` (bench -shapes).
type shapesOptions struct {
	shoppers  int // shoppers of each measured crowd, one buy each, stock for all
	rounds    int // each shape measured this many times, the shapes in turn
	gateways  int // gateways of each fleet; the load tool spreads over them
	hotShards int // shards of the hot voucher on the cluster
}

// A fleet under test and the processes whose CPU is counted.
type shapeFleet struct {
	name string
	f    *fleet.Fleet
}

// shapeCase is one of the compared shapes: a fleet and the voucher's shards.
type shapeCase struct {
	name   string
	fleet  *shapeFleet
	shards int
	runs   []shapeRun
}

// shapeRun is one measured crowd.
type shapeRun struct {
	rep     loadtest.Report
	cpu     cpuUse
	loadavg string
}

// cpuUse is the CPU time each part of the system spent during a crowd.
type cpuUse struct {
	gateways, workers, sweepers time.Duration
	redis                       time.Duration   // all nodes
	nodes                       []time.Duration // each Redis node
	redisMax                    time.Duration   // the busiest node (after sub)
	postgres                    time.Duration   // the postmaster and its backends
	broker                      time.Duration   // this process: the in-process Kafka broker
	tool                        time.Duration   // the load tool
}

func (c cpuUse) sub(o cpuUse) cpuUse {
	d := cpuUse{
		gateways: c.gateways - o.gateways, workers: c.workers - o.workers, sweepers: c.sweepers - o.sweepers,
		redis: c.redis - o.redis, postgres: c.postgres - o.postgres, broker: c.broker - o.broker,
	}
	for i := range min(len(c.nodes), len(o.nodes)) {
		d.redisMax = max(d.redisMax, c.nodes[i]-o.nodes[i])
	}
	return d
}

// runShapes measures the same crowd on one plain redis-server, on a Redis
// Cluster of 3 masters with a voucher of one shard, and on that cluster
// with a voucher of hotShards shards, each on a fleet of separate
// processes (gateways, a worker, a sweeper), in rounds, and prints the
// figures beside the first shape's, then the CPU each part spent per
// reservation and what that makes of a bigger machine room.
func runShapes(ctx context.Context, o options) error {
	so := o.shapes
	bin, work, err := binAndWork(o, "seckill-capacity-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "capacity: "+format+"\n", args...) }

	env := map[string]string{
		// The limiter must not hide the path being measured.
		"SECKILL_USER_RATE": "1000000", "SECKILL_USER_BURST": "1000000",
		"SECKILL_GLOBAL_RATE": "100000000", "SECKILL_GLOBAL_BURST": "100000000",
		"SECKILL_SHOPPER_RATE": "1000000", "SECKILL_SHOPPER_BURST": "1000000",
	}
	start := func(name string, masters int) (*shapeFleet, error) {
		f, err := fleet.Start(ctx, fleet.Options{
			Bin: bin, Dir: filepath.Join(work, name), Env: env, Logf: logf,
			Shape: fleet.Shape{Gateways: so.gateways, Workers: 1, Sweepers: 1, RedisMasters: masters},
		})
		if err != nil {
			return nil, err
		}
		return &shapeFleet{name: name, f: f}, nil
	}
	plain, err := start("plain", 1)
	if err != nil {
		return err
	}
	defer plain.f.Close()
	cluster, err := start("cluster", 3)
	if err != nil {
		return err
	}
	defer cluster.f.Close()

	cases := []*shapeCase{
		{name: "1 redis-server, shards: 1", fleet: plain, shards: 1},
		{name: "3-master cluster, shards: 1", fleet: cluster, shards: 1},
		{name: fmt.Sprintf("3-master cluster, shards: %d", so.hotShards), fleet: cluster, shards: so.hotShards},
	}
	user := int64(30_000_000)
	crowd := func(sf *shapeFleet, shoppers, shards int) (shapeRun, error) {
		args := []string{"sale", "-json", "-no-progress", "-target", strings.Join(sf.f.GatewayAddrs(), ","),
			"-concurrency", strconv.Itoa(o.concurrency), "-replay", "0", "-open-in", "2s", "-persist-wait", "90s",
			"-qty", "1", "-limit", "1", "-attempts", "1", "-shoppers", strconv.Itoa(shoppers),
			"-stock", strconv.Itoa(shoppers * 2), "-first-user", strconv.FormatInt(user, 10), "-shards", strconv.Itoa(shards)}
		user += int64(shoppers)
		var run shapeRun
		run.loadavg = loadavg()
		before := sf.cpu()
		out, tool, err := toolRun(ctx, o.tool, sf.f.Env(), args)
		run.cpu = sf.cpu().sub(before)
		run.cpu.tool = tool
		if jerr := json.Unmarshal(out, &run.rep); jerr != nil {
			if err == nil {
				err = jerr
			}
			return run, fmt.Errorf("load test on %s: %w", sf.name, err)
		}
		if !run.rep.Passed {
			return run, fmt.Errorf("load test on %s, shards %d: an invariant check failed", sf.name, shards)
		}
		return run, nil
	}

	// A short crowd on each fleet first: connections, pools and the
	// broker's partitions warm, as on a fleet that has been up a while.
	for _, sf := range []*shapeFleet{plain, cluster} {
		logf("warm-up crowd on %s", sf.name)
		if _, err := crowd(sf, min(2000, so.shoppers), 1); err != nil {
			return err
		}
	}
	for r := range so.rounds {
		for _, c := range cases {
			logf("round %d/%d: %s, %d shoppers (load average %s)", r+1, so.rounds, c.name, so.shoppers, loadavg())
			run, err := crowd(c.fleet, so.shoppers, c.shards)
			if err != nil {
				return err
			}
			c.runs = append(c.runs, run)
		}
	}
	writeShapes(os.Stdout, o, cases)
	return nil
}

// toolRun runs the load tool and returns its stdout and the CPU it used.
func toolRun(ctx context.Context, bin string, env map[string]string, args []string) ([]byte, time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "PATH="+os.Getenv("PATH"), "HOME="+os.Getenv("HOME"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	var used time.Duration
	if cmd.ProcessState != nil {
		used = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return out, used, err
}

// cpu reads the CPU time used so far by each part of the fleet.
func (sf *shapeFleet) cpu() cpuUse {
	var c cpuUse
	for _, p := range sf.f.Gateways {
		c.gateways += procCPU(p.Pid(), false)
	}
	for _, p := range sf.f.Workers {
		c.workers += procCPU(p.Pid(), false)
	}
	for _, p := range sf.f.Sweepers {
		c.sweepers += procCPU(p.Pid(), false)
	}
	c.nodes = sf.redisNodes()
	for _, d := range c.nodes {
		c.redis += d
	}
	c.postgres = procCPU(sf.f.Postgres.Pid(), true)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.broker = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return c
}

// redisNodes returns each Redis node's CPU so far, in the order of its pids.
func (sf *shapeFleet) redisNodes() []time.Duration {
	var nodes []int
	if sf.f.RedisCluster != nil {
		nodes = sf.f.RedisCluster.Pids()
	} else {
		nodes = []int{sf.f.Redis.Pid()}
	}
	out := make([]time.Duration, len(nodes))
	for i, pid := range nodes {
		out[i] = procCPU(pid, false)
	}
	return out
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on Linux.
const clockTick = 10 * time.Millisecond

// procCPU is the user and system time of pid and of its reaped children
// (/proc/<pid>/stat), with its live children's when withKids (the backends
// of a postmaster).
func procCPU(pid int, withKids bool) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces: the fields start after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		if i < len(f) {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	total := time.Duration(ticks) * clockTick
	if withKids {
		for _, kid := range devstack.ChildrenOf(pid) {
			total += procCPU(kid, false)
		}
	}
	return total
}

// loadavg is the first three fields of /proc/loadavg: what else ran.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// shapeFigures are a shape's medians over its runs and its CPU per 1000
// reservations over all of them.
type shapeFigures struct {
	rate, p99 float64
	perK      cpuUse // CPU per 1000 reservations
	accepted  int
}

func figures(c *shapeCase) shapeFigures {
	var rates, p99s []float64
	var sum cpuUse
	n := 0
	for _, r := range c.runs {
		rates = append(rates, rate(r.rep, loadtest.OutcomeAccepted))
		p99s = append(p99s, r.rep.Latency["all"].P99MS)
		n += r.rep.Outcomes[loadtest.OutcomeAccepted]
		sum = cpuUse{
			gateways: sum.gateways + r.cpu.gateways, workers: sum.workers + r.cpu.workers,
			sweepers: sum.sweepers + r.cpu.sweepers, redis: sum.redis + r.cpu.redis, redisMax: sum.redisMax + r.cpu.redisMax,
			postgres: sum.postgres + r.cpu.postgres, broker: sum.broker + r.cpu.broker, tool: sum.tool + r.cpu.tool,
		}
	}
	per := func(d time.Duration) time.Duration {
		if n == 0 {
			return 0
		}
		return d * 1000 / time.Duration(n)
	}
	return shapeFigures{
		rate: median(rates), p99: median(p99s), accepted: n,
		perK: cpuUse{
			gateways: per(sum.gateways), workers: per(sum.workers), sweepers: per(sum.sweepers),
			redis: per(sum.redis), redisMax: per(sum.redisMax), postgres: per(sum.postgres), broker: per(sum.broker), tool: per(sum.tool),
		},
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func writeShapes(w io.Writer, o options, cases []*shapeCase) {
	so := o.shapes
	fmt.Fprintf(w, "\nmake capacity: %d shoppers × 1 buy each, stock for all, %d in flight, spread over %d gateways; "+
		"fleets of %d gateways, 1 worker, 1 sweeper; %d rounds, medians; %d CPUs on this machine\n\n",
		so.shoppers, o.concurrency, so.gateways, so.gateways, so.rounds, runtime.NumCPU())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "shape\treservations/s\tratio\tp99 ms\tratio\truns (reservations/s, p99 ms, load average)")
	base := figures(cases[0])
	figs := make([]shapeFigures, len(cases))
	for i, c := range cases {
		f := figures(c)
		figs[i] = f
		var runs []string
		for _, r := range c.runs {
			runs = append(runs, fmt.Sprintf("%.0f/s %.1f ms [%s]", rate(r.rep, loadtest.OutcomeAccepted), r.rep.Latency["all"].P99MS, r.loadavg))
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.1f\t%.2f\t%s\n", c.name, f.rate, f.rate/base.rate, f.p99, f.p99/base.p99, strings.Join(runs, "; "))
	}
	_ = tw.Flush()

	fmt.Fprintf(w, "\nCPU per 1000 reservations (ms; all runs of the shape)\n\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "shape\tgateways\tworker\tsweeper\tRedis (all nodes)\tbusiest Redis node\tPostgreSQL\tbroker\tload tool")
	for i, c := range cases {
		p := figs[i].perK
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", c.name, msOf(p.gateways), msOf(p.workers), msOf(p.sweepers),
			msOf(p.redis), msOf(p.redisMax), msOf(p.postgres), msOf(p.broker), msOf(p.tool))
	}
	_ = tw.Flush()

	writeExtrapolation(w, figs[len(figs)-1], figs[1], so.hotShards)
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Assumptions of the extrapolation, printed with it.
const (
	gatewayCores = 4   // cores of one gateway instance
	workerCores  = 2   // cores of one worker instance
	headroom     = 0.6 // share of a core planned busy at the peak
)

// writeExtrapolation turns the CPU per reservation of one shape into the
// instances a target rate of buys needs, assuming CPU scales linearly with
// instances (it does for gateways and workers, which share nothing; for
// Redis while the hot voucher has at least as many shards as there are
// masters). one is the cluster with a voucher of one shard: its busiest
// node is the cap of a voucher that is not split.
func writeExtrapolation(w io.Writer, f, one shapeFigures, shards int) {
	gw, wk, rd, pg := msOf(f.perK.gateways)/1000, msOf(f.perK.workers)/1000, msOf(f.perK.redis)/1000, msOf(f.perK.postgres)/1000
	if gw <= 0 || wk <= 0 || rd <= 0 {
		return
	}
	fmt.Fprintf(w, "\nExtrapolated, not measured: from the last shape's CPU per reservation, scaled linearly; a gateway instance of %d cores, "+
		"a worker of %d, a Redis master one core (scripts run on one thread), every core planned %.0f%% busy at the peak; "+
		"every buy an order, as in the crowd above (sold_out answers cost far less: the sold-out flag answers them from memory)\n\n",
		gatewayCores, workerCores, headroom*100)
	perGateway := headroom * gatewayCores * 1000 / gw
	perWorker := headroom * workerCores * 1000 / wk
	perMaster := headroom * 1000 / rd
	fmt.Fprintf(w, "one gateway ≈ %.0f buys/s; one worker ≈ %.0f orders/s; one Redis master ≈ %.0f buys/s of the whole buying path (the reservation, the per-user limit, the events); PostgreSQL %.2f core-ms per order\n",
		perGateway, perWorker, perMaster, pg)
	if b := msOf(one.perK.redisMax) / 1000; b > 0 {
		fmt.Fprintf(w, "one voucher of one shard is held to its master's one core: ≈ %.0f buys/s at %.0f%%, ≈ %.0f at 100%%; with %d shards it may use %d masters\n",
			headroom*1000/b, headroom*100, 1000/b, shards, shards)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "buys/s\tgateways\tRedis masters (hot voucher shards ≥ masters)\tpartitions\tworkers\tPostgreSQL cores")
	for _, target := range []float64{10_000, 50_000, 100_000, 200_000} {
		masters := max(3, int(math.Ceil(target/perMaster)))
		workers := int(math.Ceil(target / perWorker))
		fmt.Fprintf(tw, "%.0f\t%d\t%d\t%d\t%d\t%.0f\n", target,
			int(math.Ceil(target/perGateway)), masters, max(6, 2*workers), workers, math.Ceil(target*pg/1000/headroom))
	}
	_ = tw.Flush()
}
