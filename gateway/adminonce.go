package gateway

// Every operator's change is in the trail and may carry an Idempotency-Key,
// as buys may: the same key with the same request is answered as the first
// time and changes nothing again; with another request it is 409 conflict.
// The key is claimed by the change's own entry in the trail (one per
// operator and key, in the change's transaction where the change is
// PostgreSQL's), so a retry on any gateway, at any moment, applies nothing
// twice; the answer is kept after, for the retries to be given.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
)

// operatorChange is one of the operator's changes: h makes it, with act
// (who, the request, its key; h fills in the kind, the target and the
// change) recorded in the trail by whatever stores the change.
type operatorChange func(c *fiber.Ctx, act *seckill.Action) error

// change runs h as an operator's change: recorded in the trail with who
// made it and the request, and idempotent by the request's Idempotency-Key.
func (s *Server) change(h operatorChange) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key, err := idempotencyKey(c.Get(HeaderIdempotencyKey))
		if err != nil {
			return err
		}
		op := operatorOf(c)
		act := &seckill.Action{Operator: op.Name, RequestID: requestIDOf(c), Key: key}
		if key == "" {
			return h(c, act)
		}
		if s.deps.Operators == nil {
			return apperr.Public(apperr.ErrUnavailable,
				"this server keeps no record of operators' changes, so it cannot honour an Idempotency-Key: send the change without one")
		}
		sum := requestFingerprint(c)
		act.Request = sum[:]
		// A retry that arrives here while its first is still running
		// waits for it, then is answered as it was.
		end, err := s.keyed.Take(c.UserContext(), keyedChange{op.Name, key})
		if err != nil {
			return err
		}
		defer end()
		if done, err := s.replay(c, op.Name, key, sum); done || err != nil {
			return err
		}
		err = h(c, act)
		if errors.Is(err, seckill.ErrKeyUsed) {
			// Another gateway made the change with this key meanwhile.
			if done, rerr := s.replay(c, op.Name, key, sum); done || rerr != nil {
				return rerr
			}
		}
		if err != nil {
			return err
		}
		ans := seckill.Answer{Status: c.Response().StatusCode(), ContentType: string(c.Response().Header.ContentType()),
			Body: append([]byte(nil), c.Response().Body()...)}
		if err := s.deps.Operators.SaveAnswer(c.UserContext(), op.Name, key, ans); err != nil {
			// The change is made and in the trail; only a retry's answer
			// is lost (it is told the change was made, see replay).
			s.log.WarnContext(c.UserContext(), "operator's change made, but its answer not kept for retries: a retry with its key is told 409 conflict",
				"operator", op.Name, "request_id", act.RequestID, "err", err)
		}
		return nil
	}
}

// How long a retry waits for the answer of a change made on another
// gateway, and how often it looks: the first keeps its answer right after
// its commit, unless it died in between (then the retry is told so).
const (
	answerWait = 5 * time.Second
	answerPoll = 50 * time.Millisecond
)

// replay answers c as the change that operator's key made was answered,
// when it made one: done is true when c is answered (or refused: the key
// was used for another request, 409 conflict).
func (s *Server) replay(c *fiber.Ctx, operator, key string, sum [sha256.Size]byte) (done bool, err error) {
	ctx := c.UserContext()
	kc, found, err := s.deps.Operators.KeyedChange(ctx, operator, key)
	if err != nil || !found {
		return false, err
	}
	if string(kc.Action.Request) != string(sum[:]) {
		return true, apperr.Publicf(apperr.ErrConflict,
			"this Idempotency-Key was used for another request (trail entry %d, %s); a key names one change: send a new key for a new change",
			kc.Action.ID, kc.Action.Kind)
	}
	// A change just made on another gateway keeps its answer a moment
	// after its commit: wait for it rather than refuse the retry.
	for !kc.Answered && time.Since(kc.Action.At) < answerWait {
		if err := pause.For(ctx, answerPoll); err != nil {
			return true, fmt.Errorf("%w: the change of this Idempotency-Key is still being made: %w", apperr.ErrUnavailable, err)
		}
		if kc, _, err = s.deps.Operators.KeyedChange(ctx, operator, key); err != nil {
			return true, err
		}
	}
	if !kc.Answered {
		return true, apperr.Publicf(apperr.ErrConflict,
			"the change of this Idempotency-Key was made (trail entry %d) but its answer was not kept; read what it changed (%s) to see it",
			kc.Action.ID, kc.Action.Target)
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "operator's change replayed, not made again",
		slog.String("operator", operator), slog.Int64("trail_id", kc.Action.ID), slog.String("request_id", requestIDOf(c)))
	c.Status(kc.Answer.Status)
	c.Response().Header.SetContentType(kc.Answer.ContentType)
	c.Response().SetBody(kc.Answer.Body)
	return true, nil
}

// keyedChange names the changes one Idempotency-Key covers: an operator's.
type keyedChange struct{ operator, key string }

// requestFingerprint is what an Idempotency-Key stands for: the method,
// the path and the body, byte for byte.
func requestFingerprint(c *fiber.Ctx) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(c.Method() + " " + c.Path() + "\n"))
	h.Write(c.Body())
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// describe fills in act's kind, target and change: what was asked, the
// request's body as sent (compacted; decodeJSON has checked it is one
// object, each field once).
func describe(act *seckill.Action, kind, target string, body []byte) {
	act.Kind, act.Target = kind, target
	var b bytes.Buffer
	if err := json.Compact(&b, body); err != nil || !bytes.HasPrefix(b.Bytes(), []byte("{")) {
		// Every change's body is an object that decodeJSON read.
		b.Reset()
		b.WriteString("{}")
	}
	act.Change = b.Bytes()
}
