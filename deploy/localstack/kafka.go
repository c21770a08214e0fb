package localstack

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KafkaOptions configures StartKafka.
type KafkaOptions struct {
	// Topics to create at start, name to partition count.
	Topics map[string]int32
	// Log receives the broker's errors and warnings; nil discards them.
	Log *slog.Logger
}

// Kafka is an in-process kfake broker: it speaks the Kafka wire protocol on
// 127.0.0.1, so clients such as sarama talk to it over TCP exactly as to
// Kafka. It keeps everything in memory; nothing survives Close.
type Kafka struct {
	// Brokers are the host:port addresses to bootstrap clients with.
	Brokers []string

	cluster   *kfake.Cluster
	closeOnce sync.Once
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
		kfake.ClusterID("seckill-localstack"),
		kfake.WithLogger(kfakeLogger{log}),
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Topics)) {
		kopts = append(kopts, kfake.SeedTopics(opts.Topics[name], name))
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("localstack: start kfake: %w", err)
	}
	k := &Kafka{Brokers: c.ListenAddrs(), cluster: c}
	log.Info("localstack: kafka (kfake) ready", "brokers", k.Brokers, "topics", opts.Topics)
	return k, nil
}

// CreateTopic creates a topic with the given number of partitions. It fails
// if the topic exists.
func (k *Kafka) CreateTopic(ctx context.Context, name string, partitions int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if partitions < 1 {
		return fmt.Errorf("localstack: topic %s: partitions must be at least 1, got %d", name, partitions)
	}
	if err := k.cluster.CreateTopic(name, partitions, nil); err != nil {
		return fmt.Errorf("localstack: create topic %s: %w", name, err)
	}
	return nil
}

// DeleteTopic deletes a topic and its data.
func (k *Kafka) DeleteTopic(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.cluster.DeleteTopic(name); err != nil {
		return fmt.Errorf("localstack: delete topic %s: %w", name, err)
	}
	return nil
}

// Cluster is the underlying kfake cluster, for tests that inject faults
// (kfake's Control hooks) or inspect groups.
func (k *Kafka) Cluster() *kfake.Cluster { return k.cluster }

// Close stops the broker and drops its connections. It is safe to call more
// than once.
func (k *Kafka) Close() {
	k.closeOnce.Do(k.cluster.Close)
}

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
