package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill/tracing"
)

// serviceName is every process's service.name: the roles of one process
// are told apart by their spans' names, and the processes of a fleet by
// their host.
const serviceName = "seckill"

// openTracing builds the process's tracer provider from the configuration
// (seckill/tracing): off, and free, without SECKILL_OTLP_ENDPOINT.
func openTracing(ctx context.Context, cfg Config, log *slog.Logger) (*tracing.Provider, error) {
	p, err := tracing.New(ctx, tracing.Config{Endpoint: cfg.OTLPEndpoint, SampleRatio: cfg.TraceSampleRatio,
		Slow: cfg.TraceSlow, Service: serviceName})
	if err != nil {
		return nil, fmt.Errorf("SECKILL_OTLP_ENDPOINT: %w", err)
	}
	if p.Enabled() {
		log.Info("tracing on", "otlp_endpoint", cfg.OTLPEndpoint, "sample_ratio", cfg.TraceSampleRatio, "slow", cfg.TraceSlow)
	}
	return p, nil
}

// tracer is what the parts make their spans with: nil when tracing is off,
// so that none of them wraps anything.
func (s *System) tracer() trace.Tracer {
	if !s.tracing.Enabled() {
		return nil
	}
	return s.tracing.Tracer()
}

// setLibraryLoggers sends go-redis's and sarama's own messages through log.
// Both libraries log through a variable of their own package, with no
// per-client setting, so this is the one place the project changes another
// package's state: once, by the command that runs the process (runServe,
// runDev), never by NewSystem, which tests call many times in one process.
// sarama's lines are its connection and metadata chatter, at debug;
// go-redis's are its pool's and failover's troubles, at warn.
func setLibraryLoggers(log *slog.Logger) {
	sarama.Logger = slog.NewLogLogger(log.With("component", "sarama").Handler(), slog.LevelDebug)
	redis.SetLogger(redisLogger{log.With("component", "go-redis")})
}

// redisLogger is go-redis's logger interface over slog.
type redisLogger struct{ log *slog.Logger }

// Printf implements go-redis's internal.Logging.
func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, v...))
}
