package main

// The replica comparison of the bench (-wait-replica): what waiting for a
// Redis replica before a buy's 202 (SECKILL_REDIS_WAIT_REPLICAS) costs the
// accepted rate of the whole system. Each run is the broker comparison's
// accepted crowd on the in-process broker (devCrowd), on a new dev process
// whose redis-server has a live replica of its own, once with
// SECKILL_REDIS_WAIT_REPLICAS=0 and once with auto (one WAIT 1 per batch
// while the master has a connected replica), in rounds, the order reversed
// in even rounds. The replica is there in both, so the replication stream
// costs both alike and what differs is the WAIT.

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// The design rule of SECKILL_REDIS_WAIT_REPLICAS=auto as the default
// (deploy/tools/bench/README.md): waiting may cost the accepted rate less
// than this share.
const maxWaitCost = 0.10

// waitModes are the compared values of SECKILL_REDIS_WAIT_REPLICAS; the
// first is the one each round's ratios are to.
var waitModes = []string{"0", "auto"}

// waitRun is one measured crowd of the replica comparison.
type waitRun struct {
	mode  string // SECKILL_REDIS_WAIT_REPLICAS
	round int
	run   brokerRun
}

// replicaName is the replica's key in brokerRun.cpu; it must not start
// with "redis", which is dev's own redis-server.
const replicaName = "replica"

// runWaitReplica runs o.waitRounds rounds of the accepted crowd with each
// of waitModes, then prints the table.
func runWaitReplica(ctx context.Context, o options, bin string, env []string, work string) error {
	var runs []waitRun
	for round := 1; round <= o.waitRounds; round++ {
		for _, mode := range inTurn(waitModes, round) {
			name := fmt.Sprintf("WAIT_REPLICAS=%s, round %d", mode, round)
			run, err := replicaCrowd(ctx, o, bin, env, filepath.Join(work, fmt.Sprintf("wait-%s-%d", mode, round)), name, mode)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			// A run that did not do what its mode says measures nothing.
			waits := run.redis.Commands["wait"].Calls
			switch {
			case mode == "0" && waits != 0:
				return fmt.Errorf("%s: the master ran %d WAITs", name, waits)
			case mode != "0" && waits == 0:
				return fmt.Errorf("%s: the master ran no WAIT: the gateway did not see its replica", name)
			}
			runs = append(runs, waitRun{mode: mode, round: round, run: run})
		}
	}
	writeWaitReplica(os.Stdout, o, runs)
	return nil
}

// replicaCrowd runs devCrowd with SECKILL_REDIS_WAIT_REPLICAS=mode, after
// giving dev's redis-server a replica of its own: a private redis-server
// with dev's settings (the append-only file on), made REPLICAOF it, and
// online (INFO replication on the master) before the first buy, which is
// when a gateway on auto first reads whether its master has replicas.
func replicaCrowd(ctx context.Context, o options, bin string, env []string, dir, name, mode string) (brokerRun, error) {
	var replica *devstack.Redis
	defer func() {
		if replica != nil {
			_ = replica.Stop(context.WithoutCancel(ctx))
		}
	}()
	hooks := devHooks{
		ready: func(ctx context.Context, rdb redis.UniversalClient) error {
			master, ok := rdb.(*redis.Client)
			if !ok {
				return fmt.Errorf("-wait-replica needs dev mode's single redis-server, not a cluster")
			}
			var err error
			replica, err = devstack.StartRedis(ctx, devstack.RedisOptions{Dir: filepath.Join(dir, "replica"), Persist: true})
			if err != nil {
				return err
			}
			return follow(ctx, master, replica)
		},
		others: func() map[string]time.Duration {
			if replica == nil {
				return nil
			}
			return map[string]time.Duration{replicaName: procCPU(replica.Pid(), false)}
		},
	}
	env = append(slices.Clone(env), "SECKILL_REDIS_WAIT_REPLICAS="+mode)
	return devCrowd(ctx, o, bin, env, dir, name, hooks)
}

// follow makes replica REPLICAOF master and waits until the master counts
// it online.
func follow(ctx context.Context, master *redis.Client, replica *devstack.Redis) error {
	host, port, err := net.SplitHostPort(master.Options().Addr)
	if err != nil {
		return err
	}
	rrdb := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rrdb.Close()
	if err := rrdb.ReplicaOf(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("REPLICAOF %s %s: %w", host, port, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		info, err := master.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the replica was not online within 30 s (INFO replication: %q, %v); its log: %s", info, err, replica.LogPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitRow is one line of the replica table, its figures per accepted buy.
type waitRow struct {
	mode        string
	round       int
	rate        float64 // accepted buys/s of the load tool
	ratio       float64 // rate over the same round's rate without WAIT; 0 when there is none
	p99MS       float64
	unavailable int     // 503 answers
	loadavg     string  // the machine's, as the crowd started
	waits       float64 // WAIT calls on the master per accepted buy
	scripts     float64 // script calls (a batch each) per accepted buy
	redis       time.Duration
	replica     time.Duration
	all         time.Duration // every process counted, the replica included
}

// waitRows computes the table's lines: each run's figures per accepted
// buy the gateway counted, and its rate over the rate of the run without
// WAIT (waitModes[0]) of the same round, so that a machine busier in one
// round than in another moves both sides of the ratio.
func waitRows(runs []waitRun) []waitRow {
	base := map[int]float64{}
	for _, r := range runs {
		if r.mode == waitModes[0] {
			base[r.round] = rate(r.run.rep, loadtest.OutcomeAccepted)
		}
	}
	rows := make([]waitRow, 0, len(runs))
	for _, r := range runs {
		row := waitRow{mode: r.mode, round: r.round, rate: rate(r.run.rep, loadtest.OutcomeAccepted),
			p99MS: r.run.rep.Latency["all"].P99MS, unavailable: r.run.rep.Outcomes[loadtest.OutcomeUnavailable], loadavg: r.run.loadavg}
		if b := base[r.round]; b > 0 {
			row.ratio = row.rate / b
		}
		if n := r.run.accept; n > 0 {
			row.waits = float64(r.run.redis.Commands["wait"].Calls) / n
			row.scripts = float64(r.run.redis.Scripts()) / n
			per := func(t time.Duration) time.Duration { return time.Duration(float64(t) / n) }
			var redisCPU, all time.Duration
			for p, t := range r.run.cpu {
				all += t
				if strings.HasPrefix(p, "redis") {
					redisCPU += t
				}
			}
			row.redis, row.replica, row.all = per(redisCPU), per(r.run.cpu[replicaName]), per(all)
		}
		rows = append(rows, row)
	}
	return rows
}

// waitVerdict is the median and the lowest over rounds of the waiting
// runs' ratios, and whether waiting met the design rule: a median cost
// under maxWaitCost. The median, not the mean: one round whose run without
// WAIT met a burst of other work on the shared machine would otherwise
// decide it alone.
func waitVerdict(rows []waitRow) (median, lowest float64, met bool) {
	var ratios []float64
	for _, r := range rows {
		if r.mode != waitModes[0] && r.ratio > 0 {
			ratios = append(ratios, r.ratio)
		}
	}
	if len(ratios) == 0 {
		return 0, 0, false
	}
	slices.Sort(ratios)
	n := len(ratios)
	median = (ratios[(n-1)/2] + ratios[n/2]) / 2
	return median, ratios[0], 1-median < maxWaitCost
}

func writeWaitReplica(w io.Writer, o options, runs []waitRun) {
	rows := waitRows(runs)
	fmt.Fprintf(w, "\n### accepted path with a live Redis replica: SECKILL_REDIS_WAIT_REPLICAS 0 and auto (%d shoppers, %d in flight, in-process broker)\n\n",
		o.brokerShoppers, o.concurrency)
	fmt.Fprintln(w, "| WAIT_REPLICAS | round | accepted/s | ÷ 0, same round | p99 | 503 | per accepted buy: EVALSHA | WAIT | CPU: redis | replica | all | load average |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.1f ms | %d | %.3f | %.3f | %s | %s | %s | %s |\n", r.mode, r.round, r.rate, r.ratio,
			r.p99MS, r.unavailable, r.scripts, r.waits, fmtMicros(r.redis), fmtMicros(r.replica), fmtMicros(r.all), r.loadavg)
	}
	median, lowest, met := waitVerdict(rows)
	verdict := "MISSED"
	if met {
		verdict = "MET"
	}
	fmt.Fprintf(w, "\nauto ÷ 0 over rounds: median %.3f (a cost of %.1f %%), lowest %.2f; target: a median cost under %.0f %% of the accepted rate: %s\n",
		median, 100*(1-median), lowest, 100*maxWaitCost, verdict)
	fmt.Fprintln(w, "CPU from /proc/<pid>/stat before and after the crowd; all is seckill dev, its redis-server and postmaster with the backends, and the replica.")
}
