package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaOptions configures StartKafka.
type KafkaOptions struct {
	// Topics to create at start, name to partition count. A topic that
	// already exists (reloaded from Dir) is kept as it is.
	Topics map[string]int32
	// Dir, when set, makes the broker keep its logs, topics and committed
	// group offsets there and reload them at the next start (dev mode, so a
	// restart loses no message in flight). Empty keeps everything in memory.
	Dir string
	// Place is the host the broker listens on: its address, and the
	// network namespace its listener is made in (the broker itself runs in
	// this process). The zero Place is 127.0.0.1.
	Place Place
	// Log receives the broker's errors and warnings; nil discards them.
	Log *slog.Logger
}

// Kafka is an in-process kfake broker: it speaks the Kafka wire protocol on
// 127.0.0.1 (or KafkaOptions.Place's host), so clients such as sarama talk to it over TCP exactly as to
// Kafka. Without KafkaOptions.Dir it keeps everything in memory and nothing
// survives Close or Restart.
type Kafka struct {
	// Brokers are the host:port addresses to bootstrap clients with. They
	// stay the same across Stop and Start.
	Brokers []string

	log   *slog.Logger
	kopts []kfake.Opt // what every start of the broker is made with, port included

	mu      sync.Mutex
	cluster *kfake.Cluster
	stopped bool
}

// StartKafka starts a one-broker kfake cluster on a free port with the given
// topics created.
func StartKafka(ctx context.Context, opts KafkaOptions) (*Kafka, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := logger(opts.Log)
	kopts := []kfake.Opt{
		kfake.NumBrokers(1), // port 0: the kernel picks a free one
		kfake.ClusterID("seckill-devstack"),
		kfake.WithLogger(kfakeLogger{log}),
	}
	if opts.Place != (Place{}) {
		kopts = append(kopts, kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return opts.Place.Listen(network, port)
		}))
	}
	if opts.Dir != "" {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("devstack: kafka dir: %w", err)
		}
		kopts = append(kopts, kfake.DataDir(dir))
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("devstack: start kfake: %w", err)
	}
	k := &Kafka{Brokers: c.ListenAddrs(), cluster: c, log: log}
	// Later starts listen where clients already point.
	_, portText, err := net.SplitHostPort(k.Brokers[0])
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("devstack: kfake address %q: %w", k.Brokers[0], err)
	}
	port, _ := strconv.Atoi(portText)
	k.kopts = append(slices.Clip(kopts), kfake.Ports(port))
	// Created here rather than with kfake.SeedTopics, which a cluster
	// reloaded from disk ignores.
	for _, name := range slices.Sorted(maps.Keys(opts.Topics)) {
		if c.TopicInfo(name) != nil {
			if n := int32(len(c.PartitionInfos(name))); n != opts.Topics[name] {
				log.Warn("devstack: kept a reloaded topic with another partition count", "topic", name, "partitions", n, "wanted", opts.Topics[name])
			}
			continue
		}
		if err := k.CreateTopic(ctx, name, opts.Topics[name]); err != nil {
			k.Close()
			return nil, err
		}
	}
	log.Info("devstack: kafka (kfake) ready", "brokers", k.Brokers, "topics", opts.Topics, "dir", opts.Dir)
	return k, nil
}

// CreateTopic creates a topic with the given number of partitions. It fails
// if the topic exists.
func (k *Kafka) CreateTopic(ctx context.Context, name string, partitions int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if partitions < 1 {
		return fmt.Errorf("devstack: topic %s: partitions must be at least 1, got %d", name, partitions)
	}
	if err := k.Cluster().CreateTopic(name, partitions, nil); err != nil {
		return fmt.Errorf("devstack: create topic %s: %w", name, err)
	}
	return nil
}

// DeleteTopic deletes a topic and its data.
func (k *Kafka) DeleteTopic(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.Cluster().DeleteTopic(name); err != nil {
		return fmt.Errorf("devstack: delete topic %s: %w", name, err)
	}
	return nil
}

// Cluster is the running kfake cluster, for tests that inject faults
// (kfake's Control hooks) or inspect groups. After Stop and Start it is a
// new one: ask again rather than keeping it.
func (k *Kafka) Cluster() *kfake.Cluster {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cluster
}

// Stop stops the broker and drops its connections, as a broker going down
// does; clients see their connections refused until Start. With
// KafkaOptions.Dir the broker first writes what it holds there. It is safe
// to call more than once.
func (k *Kafka) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		k.cluster.Close()
		k.stopped = true
	}
}

// Start starts the broker again on the same address after Stop. With
// KafkaOptions.Dir it reloads its topics, messages and committed offsets
// from there; without, it comes back empty. It does nothing while the
// broker runs.
func (k *Kafka) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.stopped {
		return nil
	}
	// The old listener is closed, but a port can be slow to free: retry
	// briefly before giving up.
	var last error
	for range 50 {
		c, err := kfake.NewCluster(k.kopts...)
		if err == nil {
			k.cluster, k.stopped = c, false
			k.log.Info("devstack: kafka (kfake) started again", "brokers", k.Brokers)
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: start kfake again on %s: %w (last: %w)", k.Brokers[0], ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("devstack: start kfake again on %s: %w", k.Brokers[0], last)
}

// Restart stops the broker and starts it again on the same address, as a
// broker restart does (see Stop and Start).
func (k *Kafka) Restart(ctx context.Context) error {
	k.Stop()
	return k.Start(ctx)
}

// Close stops the broker for good. It is safe to call more than once.
func (k *Kafka) Close() { k.Stop() }

// kfakeLogger passes kfake's errors and warnings to slog. kfake logs every
// request at info level, which would drown everything else, so info and
// debug go to slog's debug.
type kfakeLogger struct{ log *slog.Logger }

func (l kfakeLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	var sl slog.Level
	switch level {
	case kfake.LogLevelNone:
		return
	case kfake.LogLevelError:
		sl = slog.LevelError
	case kfake.LogLevelWarn:
		sl = slog.LevelWarn
	default:
		sl = slog.LevelDebug
	}
	if !l.log.Enabled(context.Background(), sl) {
		return
	}
	l.log.Log(context.Background(), sl, "kfake: "+fmt.Sprintf(msg, args...))
}
