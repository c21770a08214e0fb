package tracing

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// RedisHook is a go-redis hook that makes a span for each script call
// (EVALSHA, EVAL, FCALL, alone or in a pipeline) inside a traced context:
// the scripts are where a buy's time goes in Redis (reserve.lua, the rate
// limits); the plain reads around them would only be noise. A script's
// refusal (redis.Nil, a Lua error reply that is an answer) is not a failed
// span; a connection's failure is.
func RedisHook(p *Provider) redis.Hook { return redisHook{t: p.Tracer()} }

type redisHook struct{ t trace.Tracer }

// DialHook implements redis.Hook.
func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd.Name()) || !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmd)
		}
		ctx, span := h.t.Start(ctx, "redis "+cmd.Name(), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", cmd.Name()),
				attribute.String("redis.script.sha", scriptSHA(cmd))))
		err := next(ctx, cmd)
		endRedis(span, err)
		return err
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts := 0
		for _, c := range cmds {
			if isScript(c.Name()) {
				scripts++
			}
		}
		if scripts == 0 || !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx, cmds)
		}
		ctx, span := h.t.Start(ctx, "redis pipeline", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.Int("db.operation.batch.size", len(cmds)),
				attribute.Int("redis.scripts", scripts)))
		err := next(ctx, cmds)
		endRedis(span, err)
		return err
	}
}

func isScript(name string) bool {
	switch name {
	case "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// scriptSHA is the script's digest for EVALSHA (the first argument after
// the command); empty for EVAL, whose argument is the script itself.
func scriptSHA(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 || cmd.Name() != "evalsha" && cmd.Name() != "evalsha_ro" {
		return ""
	}
	s, _ := args[1].(string)
	return s
}

// endRedis ends span, failed only by what is not Redis's answer.
func endRedis(span trace.Span, err error) {
	var netErr net.Error
	if err != nil && (errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed)) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else if err != nil && !errors.Is(err, redis.Nil) {
		// A script's error reply (NOSCRIPT before EVAL, a refusal coded as
		// an error) is an answer: noted, not a failure.
		span.SetAttributes(attribute.String("redis.reply.error", err.Error()))
	}
	span.End()
}

// Scripter wraps s (the buying path's group commit, whose batches the hook
// above sees without their callers' contexts) so that each script call
// makes its span in the caller's trace, as RedisHook's do.
func Scripter(s redis.Scripter, t trace.Tracer) redis.Scripter { return scripter{s, t} }

type scripter struct {
	redis.Scripter
	t trace.Tracer
}

// call runs one script call under a span when ctx is traced.
func (s scripter) call(ctx context.Context, name, sha string, run func(context.Context) *redis.Cmd) *redis.Cmd {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return run(ctx)
	}
	ctx, span := s.t.Start(ctx, "redis "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", name),
			attribute.String("redis.script.sha", sha)))
	cmd := run(ctx)
	endRedis(span, cmd.Err())
	return cmd
}

// Eval implements redis.Scripter.
func (s scripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.call(ctx, "eval", "", func(ctx context.Context) *redis.Cmd { return s.Scripter.Eval(ctx, script, keys, args...) })
}

// EvalSha implements redis.Scripter.
func (s scripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.call(ctx, "evalsha", sha1, func(ctx context.Context) *redis.Cmd { return s.Scripter.EvalSha(ctx, sha1, keys, args...) })
}

// EvalRO implements redis.Scripter.
func (s scripter) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return s.call(ctx, "eval_ro", "", func(ctx context.Context) *redis.Cmd { return s.Scripter.EvalRO(ctx, script, keys, args...) })
}

// EvalShaRO implements redis.Scripter.
func (s scripter) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return s.call(ctx, "evalsha_ro", sha1, func(ctx context.Context) *redis.Cmd { return s.Scripter.EvalShaRO(ctx, sha1, keys, args...) })
}
