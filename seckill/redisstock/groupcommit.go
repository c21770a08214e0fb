package redisstock

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// GroupCommit returns the face of rdb that the buying path's calls go
// through: go-redis's blocking autopipeliner, which writes the commands of
// concurrent callers to Redis together, one write and one read for a whole
// batch, instead of one round trip per call. Each caller still waits for its
// own reply, and each script still runs atomically on its own in Redis; only
// the system calls and the round trips are shared.
//
// Batches are not held back to fill (no linger): while one batch is in
// flight the next callers queue up and leave together as soon as it
// returns, up to 300 commands, so a lone buy pays one round trip and a crowd
// of 64 in flight pays one for dozens. One instance is kept per client, so
// the per-user limit, the unpaid strikes' read, the reservation and the
// promises' HDEL (promisebatch.go) share the same batches.
//
// The autopipeliner ignores a caller's context once its command is queued:
// a batch on a link gone silent holds every caller queued behind it until
// the link returns. The buy path's calls (Eval, EvalSha and their read-only
// forms, what the reservation and the rate limits send, and the strikes'
// ZRangeArgsWithScores) therefore wait on the returned face only as long as
// their context lives, then answer its error; the command itself may still
// run when the link returns (see awaitCmd). Other commands sent through it
// wait for their batch whatever their context.
//
// When rdb offers no autopipeliner (a configuration it refuses), rdb itself
// is returned: every call is then its own round trip, as before.
func GroupCommit(rdb redis.UniversalClient) redis.Cmdable {
	ap, err := rdb.AutoPipeline()
	if err != nil {
		return rdb
	}
	return contextScripts{ap}
}

// contextScripts is a Cmdable whose script calls end when their context
// does (see GroupCommit).
type contextScripts struct{ redis.Cmdable }

// Eval waits for its reply only while ctx lives.
func (c contextScripts) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return await(ctx, func(ctx context.Context) *redis.Cmd { return c.Cmdable.Eval(ctx, script, keys, args...) }, nil)
}

// EvalSha waits for its reply only while ctx lives.
func (c contextScripts) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return await(ctx, func(ctx context.Context) *redis.Cmd { return c.Cmdable.EvalSha(ctx, sha, keys, args...) }, nil)
}

// EvalRO waits for its reply only while ctx lives.
func (c contextScripts) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return await(ctx, func(ctx context.Context) *redis.Cmd { return c.Cmdable.EvalRO(ctx, script, keys, args...) }, nil)
}

// EvalShaRO waits for its reply only while ctx lives.
func (c contextScripts) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return await(ctx, func(ctx context.Context) *redis.Cmd { return c.Cmdable.EvalShaRO(ctx, sha, keys, args...) }, nil)
}

// ZRangeArgsWithScores waits for its reply only while ctx lives: the
// unpaid strikes' read of the buy path (seckill/hoard) shares the batches.
func (c contextScripts) ZRangeArgsWithScores(ctx context.Context, z redis.ZRangeArgs) *redis.ZSliceCmd {
	return awaitCmd(ctx, func(ctx context.Context) *redis.ZSliceCmd { return c.Cmdable.ZRangeArgsWithScores(ctx, z) },
		nil, redis.NewZSliceCmd)
}

// errGaveUp is awaitCmd's error when the caller's context ended before the
// reply came: the command is still on its way, and late will get it.
var errGaveUp = errors.New("gave up waiting for the reply")

// await runs call and returns its command, or, when ctx ends first, a
// command failed with ctx's error (see awaitCmd).
func await(ctx context.Context, call func(context.Context) *redis.Cmd, late func(*redis.Cmd)) *redis.Cmd {
	return awaitCmd(ctx, call, late, redis.NewCmd)
}

// awaitCmd runs call and returns its command, or, when ctx ends first, a
// command made by fresh and failed with ctx's error. An abandoned call still
// runs to its end, on ctx's values without its deadline (the autopipeliner
// ignores the deadline anyway; a plain client's own timeouts bound it), and
// late, when not nil, then gets its command: whatever it did in Redis,
// nobody else will read the answer.
func awaitCmd[C redis.Cmder](ctx context.Context, call func(context.Context) C, late func(C), fresh func(context.Context, ...any) C) C {
	if ctx.Done() == nil {
		return call(ctx)
	}
	fail := func(err error) C {
		cmd := fresh(ctx)
		cmd.SetErr(err)
		return cmd
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	done := make(chan C) // unbuffered: a handed-over command is the caller's
	gone := make(chan struct{})
	go func() {
		cmd := call(context.WithoutCancel(ctx))
		select {
		case done <- cmd:
		case <-gone:
			if late != nil {
				late(cmd)
			}
		}
	}()
	select {
	case cmd := <-done:
		return cmd
	case <-ctx.Done():
		close(gone)
		return fail(fmt.Errorf("%w: %w", errGaveUp, ctx.Err()))
	}
}
