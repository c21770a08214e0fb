package chaos

// The served system on a three-node Apache Kafka cluster (Options.ApacheKafka)
// and the faults of that cluster: nodes killed -9, frozen, two of three
// down, the active controller killed, the whole cluster restarted; and the
// Apache forms of the faults the in-process broker stages by withholding
// answers (a worker killed mid-batch, a gateway killed between the script
// and the Kafka write), where a frozen node is what keeps the answer away.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/flashsale/seckill/deploy/devstack"
	"github.com/flashsale/seckill/deploy/tools/fleet"
	"github.com/flashsale/seckill/orders/kafkaq"
	"github.com/flashsale/seckill/seckill/pause"
)

// Faults of the three-node Apache Kafka cluster (Options.ApacheKafka).
const (
	FaultLeaderKilled     = "kafka: leader of the busiest partition killed -9, started again"
	FaultBrokerFrozen     = "kafka: a broker frozen (SIGSTOP)"
	FaultTwoBrokersDown   = "kafka: two of three brokers down (below min.insync.replicas)"
	FaultControllerKilled = "kafka: active controller killed -9, started again"
	FaultClusterRestart   = "kafka: whole cluster restarted"
)

// ApacheFaults lists the faults of a run on Apache Kafka (Options.ApacheKafka),
// in the order Run injects them: the services' and processes' faults that
// do not need the in-process broker, then the cluster's own. The broker
// restart of the in-process broker is the whole cluster's restart here; the
// whole `seckill dev` process runs its own broker and is left out.
func ApacheFaults() []string {
	return []string{FaultPostgresFrozen, FaultPostgresRestart, FaultRedisKilled, FaultRedisDataLost,
		FaultWorkerKilled, FaultGatewayKilled, FaultDescriptors, FaultSocketFlood,
		FaultLeaderKilled, FaultBrokerFrozen, FaultTwoBrokersDown, FaultControllerKilled, FaultClusterRestart}
}

// apacheOnly are the faults that need the Apache cluster.
var apacheOnly = []string{FaultLeaderKilled, FaultBrokerFrozen, FaultTwoBrokersDown, FaultControllerKilled, FaultClusterRestart}

// kfakeOnly are the faults that need the in-process broker.
var kfakeOnly = []string{FaultBrokerRestart, FaultWholeProcessKill, FaultFleet}

// checkFaults refuses a fault the run's broker cannot stage.
func checkFaults(opts Options, names []string) error {
	known := Faults()
	if opts.ApacheKafka {
		known = ApacheFaults()
	} else {
		known = append(known, FaultFleet)
	}
	for _, n := range names {
		if slices.Contains(known, n) {
			continue
		}
		switch {
		case opts.ApacheKafka && slices.Contains(kfakeOnly, n):
			return fmt.Errorf("chaos: %q needs the in-process broker: run it without Options.ApacheKafka", n)
		case !opts.ApacheKafka && slices.Contains(apacheOnly, n):
			return fmt.Errorf("chaos: %q needs the Apache Kafka cluster: set Options.ApacheKafka", n)
		}
		return fmt.Errorf("chaos: unknown fault %q", n)
	}
	return nil
}

// apacheServed is what the served system has on Apache Kafka besides the
// fleet: the cluster and the worker and sweeper processes the suite runs
// itself (the fleet's own wait for its workers asks its in-process broker).
type apacheServed struct {
	kafka   *devstack.ApacheKafka
	sweeper *fleet.Process
}

// startApacheServed starts the cluster, then the fleet's services and its
// gateway pointed at the cluster, then a worker and a sweeper likewise.
func (r *runner) startApacheServed(ctx context.Context, dir string) (_ *served, err error) {
	r.opts.Logf("starting a 3-node Apache Kafka cluster in %s", filepath.Join(dir, "apache-kafka"))
	k, err := devstack.StartApacheKafka(ctx, devstack.ApacheKafkaOptions{
		Brokers: 3, Dir: filepath.Join(dir, "apache-kafka"),
		Topics: map[string]int32{fleet.Topic: 6, fleet.Topic + kafkaq.DeadLetterSuffix: 1},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	env := servedEnv()
	env["SECKILL_KAFKA_BROKERS"] = strings.Join(k.Brokers, ",")
	f, err := fleet.Start(ctx, fleet.Options{
		Bin: r.opts.Bin, Dir: dir,
		Shape:        fleet.Shape{Gateways: 1},
		RedisPersist: true, AdminToken: r.admin, JWTSecret: r.secret, Logf: r.opts.Logf, Env: env,
	})
	if err != nil {
		return nil, err
	}
	s := &served{r: r, Fleet: f, gateway: f.Gateways[0], apache: &apacheServed{kafka: k}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	for _, role := range []string{"worker", "sweeper"} {
		addr, err := fleet.FreeAddr()
		if err != nil {
			return nil, err
		}
		penv := f.Env()
		penv["SECKILL_ROLES"], penv["SECKILL_HTTP_ADDR"] = role, addr
		p := fleet.NewProcess(role+"-1", r.opts.Bin, dir, []string{"serve"}, penv)
		if role == "worker" {
			s.worker = p
		} else {
			s.apache.sweeper = p
		}
		if err := p.Start(ctx, 2*time.Minute); err != nil {
			return nil, err
		}
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return s, nil
}

func (a *apacheServed) close() {
	if a.sweeper != nil {
		a.sweeper.Stop(10 * time.Second)
	}
	_ = a.kafka.Close()
}

// kafkaDown is how long a Kafka node stays killed, frozen or stopped.
func (o Options) kafkaDown() time.Duration {
	if o.KafkaDown > 0 {
		return o.KafkaDown
	}
	return 10 * time.Second
}

// apacheFault returns the injection of a fault on the served system on
// Apache Kafka, or nil for a fault that is not the cluster's.
func (s *served) apacheFault(name string) func(ctx context.Context, c *crowd, res *Result) error {
	k, down := s.apache.kafka, s.r.opts.kafkaDown()
	note := func(res *Result, format string, args ...any) {
		res.Notes = append(res.Notes, fmt.Sprintf(format, args...))
	}
	switch name {
	case FaultLeaderKilled:
		return func(ctx context.Context, _ *crowd, res *Result) error {
			node, part, err := s.busiestLeader(ctx)
			if err != nil {
				return err
			}
			k.Kill(node)
			note(res, "node %d, leader of partition %d (the most messages), killed -9; started again %v later", node, part, down)
			if err := pause.For(ctx, down); err != nil {
				return err
			}
			return k.Start(ctx, node)
		}
	case FaultBrokerFrozen:
		return func(ctx context.Context, _ *crowd, res *Result) error {
			node, part, err := s.busiestLeader(ctx)
			if err != nil {
				return err
			}
			if err := k.Freeze(node); err != nil {
				return err
			}
			defer k.Thaw(node)
			note(res, "node %d, leader of partition %d (the most messages), frozen %v", node, part, down)
			return pause.For(ctx, down)
		}
	case FaultTwoBrokersDown:
		return s.twoBrokersDown
	case FaultControllerKilled:
		return func(ctx context.Context, _ *crowd, res *Result) error {
			node, err := k.Controller(ctx)
			if err != nil {
				return err
			}
			k.Kill(node)
			note(res, "node %d, the active controller, killed -9; started again %v later", node, down)
			if err := pause.For(ctx, down); err != nil {
				return err
			}
			return k.Start(ctx, node)
		}
	case FaultClusterRestart:
		return func(ctx context.Context, _ *crowd, res *Result) error {
			began := time.Now()
			if err := eachNode(func(i int) error { return k.Stop(ctx, i) }); err != nil {
				return err
			}
			stopped := time.Since(began)
			if err := pause.For(ctx, s.r.opts.Down); err != nil {
				return err
			}
			began = time.Now()
			// Together: a node of the three serves only once a majority of
			// the controllers runs.
			if err := eachNode(func(i int) error { return k.Start(ctx, i) }); err != nil {
				return err
			}
			note(res, "all 3 nodes stopped (SIGTERM) in %v, down %v, started again in %v",
				stopped.Round(100*time.Millisecond), s.r.opts.Down, time.Since(began).Round(100*time.Millisecond))
			return nil
		}
	case FaultWorkerKilled:
		return func(ctx context.Context, _ *crowd, res *Result) error {
			// The group coordinator frozen: the worker's offset commit gets
			// no answer, so a worker that has persisted a batch in
			// PostgreSQL waits there on its Kafka commit, where it dies.
			node, err := s.coordinator()
			if err != nil {
				return err
			}
			if err := k.Freeze(node); err != nil {
				return err
			}
			defer k.Thaw(node)
			if err := pause.For(ctx, time.Second); err != nil {
				return err
			}
			s.worker.Kill()
			k.Thaw(node)
			note(res, "worker killed 1 s into a freeze of node %d, its group's coordinator (offset commits unanswered)", node)
			return s.worker.Start(ctx, time.Minute)
		}
	case FaultGatewayKilled:
		return func(ctx context.Context, c *crowd, res *Result) error {
			// Every leader of the topic frozen: produce requests get no
			// answer, so buys have run reserve.lua and wait on the Kafka
			// write, where the gateway dies.
			leaders, err := k.Leaders(ctx, fleet.Topic)
			if err != nil {
				return err
			}
			nodes := slices.Compact(slices.Sorted(slices.Values(leaders)))
			for _, n := range nodes {
				if err := k.Freeze(n); err != nil {
					return err
				}
				defer k.Thaw(n)
			}
			for end := time.Now().Add(2 * time.Second); c.inFlight.Load() == 0 && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			if err := pause.For(ctx, time.Second); err != nil {
				return err
			}
			caught := c.inFlight.Load()
			s.gateway.Kill()
			for _, n := range nodes {
				k.Thaw(n)
			}
			note(res, "gateway killed with %d buys in flight while nodes %v, every leader of the topic, were frozen", caught, nodes)
			return s.gateway.Start(ctx, time.Minute)
		}
	}
	return nil
}

// twoBrokersDown stops two of the three nodes, the busiest partition's
// leader first, gracefully (the controllers move leadership and shrink the
// in-sync replicas while a majority still runs), so the one left leads every
// partition below min.insync.replicas; then starts both again. Buys meanwhile
// must be answered 503 with a Retry-After, never 202.
func (s *served) twoBrokersDown(ctx context.Context, c *crowd, res *Result) error {
	k, down := s.apache.kafka, s.r.opts.kafkaDown()
	first, _, err := s.busiestLeader(ctx)
	if err != nil {
		return err
	}
	second := (first + 1) % 3
	began := time.Now()
	for _, n := range []int{first, second} {
		if err := k.Stop(ctx, n); err != nil {
			return err
		}
	}
	stopped := time.Since(began)
	// Counted from a second after both are down: the graceful stops take
	// seconds, and buys until then rightly succeed, the last acknowledged
	// ones answered a moment after.
	if err := pause.For(ctx, time.Second); err != nil {
		return err
	}
	before, firstBefore := c.answerCounts(), c.firstAccepts.Load()
	if err := pause.For(ctx, down-time.Second); err != nil {
		return err
	}
	during, first202 := c.answerCounts(), c.firstAccepts.Load()-firstBefore
	held := int64(-1)
	if d, err := s.api.drift(ctx, c.voucherID); err == nil {
		held = d.InFlight
	}
	if err := eachNode(func(i int) error {
		if i == first || i == second {
			return k.Start(ctx, i)
		}
		return nil
	}); err != nil {
		return err
	}
	diff := map[string]int{}
	for l, n := range during {
		if d := n - before[l]; d > 0 {
			diff[l] = d
		}
	}
	res.Notes = append(res.Notes, fmt.Sprintf("nodes %d and %d stopped (SIGTERM, %v), then both down %v: answers meanwhile %s (202s at a first try: %d; the others replay a hold kept on an unclear write); holds in Redis without an order at the end: %d",
		first, second, stopped.Round(100*time.Millisecond), down, labels(diff), first202, held))
	if first202 > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d new buys answered 202 while two of three brokers were down (below min.insync.replicas)", first202))
	}
	if n := diff[label503NoRetryAfter]; n > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d answers 503 without a Retry-After while two brokers were down", n))
	}
	return nil
}

// busiestLeader returns the partition of the orders topic with the most
// messages and the node that leads it.
func (s *served) busiestLeader(ctx context.Context) (node int, partition int32, err error) {
	client, err := sarama.NewClient(s.apache.kafka.Brokers, kafkaq.ProducerConfig())
	if err != nil {
		return -1, -1, fmt.Errorf("chaos: kafka client: %w", err)
	}
	defer func() { _ = client.Close() }()
	parts, err := client.Partitions(fleet.Topic)
	if err != nil {
		return -1, -1, fmt.Errorf("chaos: partitions of %s: %w", fleet.Topic, err)
	}
	most := int64(-1)
	for _, p := range parts {
		end, err := client.GetOffset(fleet.Topic, p, sarama.OffsetNewest)
		if err != nil {
			return -1, -1, fmt.Errorf("chaos: end offset of %s/%d: %w", fleet.Topic, p, err)
		}
		if end > most {
			most, partition = end, p
		}
	}
	node, err = s.apache.kafka.Leader(ctx, fleet.Topic, partition)
	return node, partition, err
}

// coordinator returns the node that coordinates the workers' group.
func (s *served) coordinator() (int, error) {
	client, err := sarama.NewClient(s.apache.kafka.Brokers, kafkaq.ConsumerGroupConfig())
	if err != nil {
		return -1, fmt.Errorf("chaos: kafka client: %w", err)
	}
	defer func() { _ = client.Close() }()
	b, err := client.Coordinator(kafkaq.DefaultGroup)
	if err != nil {
		return -1, fmt.Errorf("chaos: coordinator of %s: %w", kafkaq.DefaultGroup, err)
	}
	return int(b.ID()), nil
}

// eachNode runs do on the three nodes at once.
func eachNode(do func(i int) error) error {
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = do(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// answerCounts is a copy of the answers so far, by label.
func (c *crowd) answerCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.answers)
}
