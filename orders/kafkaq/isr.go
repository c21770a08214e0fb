package kafkaq

// The producer's view of the topic's in-sync replicas: a partition with
// fewer than min.insync.replicas refuses every write with acks=all
// (NOT_ENOUGH_REPLICAS), and sarama would retry each one for its whole
// budget, which exists for leader elections. The guard reads the client's
// cached metadata (sarama refreshes it on every retried write) so a write to
// such a partition is refused at once: before the hand-over when the cache
// already says so (the message certainly does not exist), or while waiting
// (the message may still be written later; the caller settles that).

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// isrRefreshEvery bounds how often refused writes ask a broker for fresh
// metadata: a refused write is not handed to sarama, so nothing else would
// notice the partition heal.
const isrRefreshEvery = time.Second

// isrPollEvery is how often a waiting Publish looks at the cached in-sync
// replicas of its partition: cheap (memory only), and short beside the
// seconds a write below min.insync.replicas would otherwise wait.
const isrPollEvery = 200 * time.Millisecond

// isrGuard knows the topic's min.insync.replicas and judges partitions from
// the client's metadata cache.
type isrGuard struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
	topic  string
	log    *slog.Logger

	// part is the producer's own partitioner; sarama's hash partitioner
	// keeps one hasher, so concurrent Publish calls take partMu to use it.
	partMu sync.Mutex
	part   sarama.Partitioner

	mu          sync.Mutex
	minISR      int       // 0 until read from the cluster
	asking      bool      // a read of min.insync.replicas is running
	refreshing  bool      // a metadata refresh is running
	lastRefresh time.Time // when the last refresh began
}

func newISRGuard(client sarama.Client, topic string, log *slog.Logger) (*isrGuard, error) {
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, fmt.Errorf("kafkaq: producer: admin: %w", err)
	}
	g := &isrGuard{client: client, admin: admin, topic: topic, log: log, part: sarama.NewHashPartitioner(topic)}
	g.learnMinISR()
	return g, nil
}

// partition is where msg goes: the producer's own partitioner over the
// cached partition count, or -1 when the count is not known.
func (g *isrGuard) partition(msg *sarama.ProducerMessage) int32 {
	parts, err := g.client.Partitions(g.topic)
	if err != nil || len(parts) == 0 {
		return -1
	}
	g.partMu.Lock()
	p, err := g.part.Partition(msg, int32(len(parts)))
	g.partMu.Unlock()
	if err != nil {
		return -1
	}
	return p
}

// below reports whether partition p has fewer in-sync replicas than the
// topic's min.insync.replicas, by the cached metadata. Unknown is not below:
// the write then goes to the broker, whose answer decides.
func (g *isrGuard) below(p int32) (isr, minISR int, ok bool) {
	if p < 0 {
		return 0, 0, false
	}
	in, err := g.client.InSyncReplicas(g.topic, p)
	if err != nil {
		return 0, 0, false
	}
	replicas, err := g.client.Replicas(g.topic, p)
	if err != nil || len(in) >= len(replicas) {
		return len(in), 0, false
	}
	g.mu.Lock()
	minISR = g.minISR
	g.mu.Unlock()
	if minISR == 0 {
		g.learnMinISR()
		return len(in), 0, false
	}
	return len(in), minISR, len(in) < minISR
}

// refreshSoon asks a broker for the topic's metadata in the background, at
// most once a second, so a partition whose writes are refused from the cache
// is seen again when it heals.
func (g *isrGuard) refreshSoon() {
	g.mu.Lock()
	if g.refreshing || time.Since(g.lastRefresh) < isrRefreshEvery {
		g.mu.Unlock()
		return
	}
	g.refreshing, g.lastRefresh = true, time.Now()
	g.mu.Unlock()
	go func() {
		if err := g.client.RefreshMetadata(g.topic); err != nil {
			g.log.Debug("kafka metadata refresh", "topic", g.topic, "err", err)
		}
		g.mu.Lock()
		g.refreshing = false
		g.mu.Unlock()
	}()
}

// learnMinISR reads the topic's min.insync.replicas in the background, once
// it succeeds; until then no write is refused from the cache.
func (g *isrGuard) learnMinISR() {
	g.mu.Lock()
	if g.asking || g.minISR > 0 {
		g.mu.Unlock()
		return
	}
	g.asking = true
	g.mu.Unlock()
	go func() {
		n, err := g.readMinISR()
		g.mu.Lock()
		g.asking = false
		if err == nil {
			g.minISR = n
		}
		g.mu.Unlock()
		if err != nil {
			g.log.Debug("kafka min.insync.replicas not read", "topic", g.topic, "err", err)
		}
	}()
}

func (g *isrGuard) readMinISR() (int, error) {
	results, err := g.admin.DescribeConfigs([]*sarama.ConfigResource{{
		Type: sarama.TopicResource, Name: g.topic, ConfigNames: []string{"min.insync.replicas"},
	}}, sarama.DescribeConfigsOptions{})
	if err != nil {
		return 0, err
	}
	for _, r := range results {
		if r.Name != g.topic {
			continue
		}
		if r.ErrorCode != sarama.ErrNoError {
			return 0, fmt.Errorf("describe %s: %w: %s", g.topic, r.ErrorCode, r.ErrorMsg)
		}
		for _, e := range r.Configs {
			if e.Name != "min.insync.replicas" {
				continue
			}
			n, err := strconv.Atoi(e.Value)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("min.insync.replicas %q", e.Value)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("min.insync.replicas of %s not in the answer", g.topic)
}

// belowMinISRError is a write refused because its partition has fewer
// in-sync replicas than min.insync.replicas. It wraps
// sarama.ErrNotEnoughReplicas, the broker's own answer in that state.
type belowMinISRError struct {
	partition   int32
	isr, minISR int
}

func (e *belowMinISRError) Error() string {
	return fmt.Sprintf("partition %d has %d in-sync replicas of the %d min.insync.replicas needs: %v",
		e.partition, e.isr, e.minISR, sarama.ErrNotEnoughReplicas)
}

func (e *belowMinISRError) Unwrap() error { return sarama.ErrNotEnoughReplicas }

// refusal is the error of a write to partition p when the cache says p is
// below min.insync.replicas, else nil.
func (g *isrGuard) refusal(p int32) error {
	if isr, minISR, below := g.below(p); below {
		return &belowMinISRError{partition: p, isr: isr, minISR: minISR}
	}
	return nil
}
