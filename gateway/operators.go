package gateway

// Who an operator is (deploy/OPERATING.md, "Operators"): SECKILL_ADMIN_TOKEN
// is root, the bootstrap credential; every other operator has a named token
// of their own with a scope, read or write, kept in PostgreSQL as its
// SHA-256. Every change an operator makes goes into the trail (admin.go and
// the record), and GET /api/v1/admin/actions reads it.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Operators is the operators' credentials, trail and the answers kept for
// their keyed changes, in PostgreSQL (*pgstore.Store implements it).
type Operators interface {
	// LiveOperators returns the operators whose token works, by the
	// token's SHA-256.
	LiveOperators(ctx context.Context) (map[[sha256.Size]byte]seckill.Operator, error)
	// RecordAction appends a change made outside PostgreSQL (the
	// breaker's switch) to the trail; a used Idempotency-Key is
	// seckill.ErrKeyUsed.
	RecordAction(ctx context.Context, act seckill.Action) (seckill.Action, error)
	// Actions returns up to limit entries after the entry afterID,
	// oldest first.
	Actions(ctx context.Context, afterID int64, limit int) ([]seckill.Action, error)
	// KeyedChange returns what an operator's Idempotency-Key made, with
	// the answer kept for it; found is false when it made nothing.
	KeyedChange(ctx context.Context, operator, key string) (kc seckill.KeyedChange, found bool, err error)
	// SaveAnswer keeps the answer to an operator's keyed change for its
	// retries.
	SaveAnswer(ctx context.Context, operator, key string, a seckill.Answer) error
}

// operatorKey is the key of the request's operator in its locals.
type operatorKey struct{}

// operatorOf is the operator requireAdmin let through.
func operatorOf(c *fiber.Ctx) seckill.Operator {
	op, _ := c.Locals(operatorKey{}).(seckill.Operator)
	return op
}

// operatorsRefresh is how old the gateway's copy of the live tokens may be
// before a request reads them again: a token revoked stops working on every
// gateway within it, and a request with an unknown token (a new operator's,
// or a guess) costs PostgreSQL at most one read per this, however many come.
const operatorsRefresh = time.Second

// operatorTokens is the gateway's copy of the live operators' tokens,
// read from the record when older than operatorsRefresh, one read at a
// time (others wait for it and share its answer).
type operatorTokens struct {
	src Operators

	read sync.Mutex // held by the one read in progress
	mu   sync.Mutex
	live map[[sha256.Size]byte]seckill.Operator
	at   time.Time // when live was read; zero: never
}

// lookup returns the live operator whose token has digest; ok is false
// for a token no operator has (as of a read at most operatorsRefresh old).
// While the record cannot be read, the last copy answers for up to a minute
// more, then every named token waits for the record (root still works).
func (o *operatorTokens) lookup(ctx context.Context, digest [sha256.Size]byte) (seckill.Operator, bool, error) {
	if op, ok, fresh := o.cached(digest, operatorsRefresh); fresh {
		return op, ok, nil
	}
	o.read.Lock()
	defer o.read.Unlock()
	if op, ok, fresh := o.cached(digest, operatorsRefresh); fresh {
		return op, ok, nil // read by the request this one waited for
	}
	live, err := o.src.LiveOperators(ctx)
	if err != nil {
		if op, ok, fresh := o.cached(digest, time.Minute); fresh {
			return op, ok, nil
		}
		return seckill.Operator{}, false, fmt.Errorf("operators' tokens: %w", err)
	}
	o.mu.Lock()
	o.live, o.at = live, time.Now()
	o.mu.Unlock()
	op, ok := live[digest]
	return op, ok, nil
}

// cached answers from the copy when it is younger than maxAge.
func (o *operatorTokens) cached(digest [sha256.Size]byte, maxAge time.Duration) (op seckill.Operator, ok, fresh bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.at.IsZero() || time.Since(o.at) > maxAge {
		return seckill.Operator{}, false, false
	}
	op, ok = o.live[digest]
	return op, ok, true
}

// requireAdmin lets through an operator: root (SECKILL_ADMIN_TOKEN,
// compared in constant time) or a named operator whose token is live, and
// remembers who. A read-scope token is refused every change (403): GET and
// HEAD need read, every other method write. A shopper's valid token is told
// 403, anything else 401.
func (s *Server) requireAdmin(c *fiber.Ctx) error {
	tok, ok := bearer(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return apperr.Public(apperr.ErrUnauthenticated, "this is an operator route: send Authorization: Bearer <operator token>")
	}
	// Comparing digests keeps the time independent of the token's length too.
	got := sha256.Sum256([]byte(tok))
	op := seckill.Operator{Name: seckill.RootOperator, Scope: seckill.ScopeWrite}
	known := subtle.ConstantTimeCompare(got[:], s.adminDigest[:]) == 1
	if !known && s.operators != nil {
		var err error
		if op, known, err = s.operators.lookup(c.UserContext(), got); err != nil {
			return err
		}
	}
	if !known {
		if uid, err := s.deps.Tokens.Verify(tok); err == nil && uid > 0 {
			return apperr.Public(apperr.ErrForbidden, "this is an operator route; a shopper's session cannot use it")
		}
		return apperr.Public(apperr.ErrUnauthenticated, "the operator token is wrong or revoked")
	}
	need := seckill.ScopeWrite
	if c.Method() == fiber.MethodGet || c.Method() == fiber.MethodHead {
		need = seckill.ScopeRead
	}
	if !op.Scope.Allows(need) {
		return apperr.Publicf(apperr.ErrForbidden,
			"operator %q has a %s token: changes need a write token (seckill operators add NAME --scope write)", op.Name, op.Scope)
	}
	c.Locals(operatorKey{}, op)
	return c.Next()
}

// Bounds of a page of the trail.
const (
	defaultActionsPage = 100
	maxActionsPage     = 1000
)

// operatorActions is GET /api/v1/admin/actions: the trail, oldest first,
// a page after the entry ?after= (0, the start, by default) of at most
// ?limit= entries (100 by default, at most 1000).
func (s *Server) operatorActions(c *fiber.Ctx) error {
	if s.deps.Operators == nil {
		return apperr.Public(apperr.ErrUnavailable, "the operators' trail is not available on this server")
	}
	// A parameter sent empty is refused, not taken for its default: the
	// document's patterns admit no empty value.
	args := c.Context().QueryArgs()
	after := int64(0)
	if raw := c.Query("after"); args.Has("after") && raw != "0" {
		var err error
		if after, err = parseID(raw, "after", "after (the id of the last entry read, or 0)"); err != nil {
			return err
		}
	}
	limit := defaultActionsPage
	if raw := c.Query("limit"); args.Has("limit") {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > maxActionsPage || raw != strconv.Itoa(n) {
			return apperr.InvalidField("limit", "limit must be a whole number from 1 to %d", maxActionsPage)
		}
		limit = n
	}
	acts, err := s.deps.Operators.Actions(c.UserContext(), after, limit)
	if err != nil {
		return err
	}
	out := api.OperatorActions{Actions: make([]api.OperatorAction, 0, len(acts)), NextAfter: idString(after)}
	for _, a := range acts {
		out.Actions = append(out.Actions, api.OperatorAction{ID: idString(a.ID), At: a.At.UTC(), Operator: a.Operator,
			Action: a.Kind, Target: a.Target, RequestID: a.RequestID, IdempotencyKey: a.Key, Change: a.Change})
		out.NextAfter = idString(a.ID)
	}
	return c.JSON(out)
}
