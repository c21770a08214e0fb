package pgstore

// The operators and their trail (migrations/010_operators.sql): named
// tokens kept as their SHA-256, and every change an operator made, written
// in the change's own transaction where the change is this store's.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// answerLife is how long a keyed change's answer is kept for its retries.
// A retry comes within seconds or minutes; after a day the key still
// refuses a second change (the trail keeps it), but its answer is gone.
const answerLife = 24 * time.Hour

// execer is what insertAction needs of a pool or a transaction.
type execer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// insertAction appends act to the trail through q and returns it as
// stored. An operator's Idempotency-Key that already made a change is
// seckill.ErrKeyUsed (with apperr.ErrConflict); in a transaction, that
// aborts it.
func insertAction(ctx context.Context, q execer, act seckill.Action) (seckill.Action, error) {
	change := act.Change
	if len(change) == 0 {
		change = []byte("{}")
	}
	var key *string
	if act.Key != "" {
		key = &act.Key
	}
	err := q.QueryRow(ctx, `INSERT INTO operator_actions
		(operator, action, target, request_id, idempotency_key, request_sha256, change)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, at`,
		act.Operator, act.Kind, act.Target, act.RequestID, key, act.Request, string(change)).Scan(&act.ID, &act.At)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == codeUniqueViolation {
		return seckill.Action{}, fmt.Errorf("pgstore: operator %q: %w: %w", act.Operator, apperr.ErrConflict, seckill.ErrKeyUsed)
	}
	if err != nil {
		return seckill.Action{}, fmt.Errorf("pgstore: record %s by %q: %w", act.Kind, act.Operator, err)
	}
	act.At = act.At.UTC()
	act.Change = change
	return act, nil
}

// RecordAction appends act, a change made outside PostgreSQL (the
// breaker's switch, a shopper's strikes cleared), to the trail.
func (s *Store) RecordAction(ctx context.Context, act seckill.Action) (_ seckill.Action, err error) {
	defer unavailable(&err)
	return insertAction(ctx, s.pool, act)
}

const actionColumns = `id, at, operator, action, target, request_id, coalesce(idempotency_key, ''), request_sha256, change`

func scanAction(row pgx.Row) (seckill.Action, error) {
	var a seckill.Action
	var change []byte
	err := row.Scan(&a.ID, &a.At, &a.Operator, &a.Kind, &a.Target, &a.RequestID, &a.Key, &a.Request, &change)
	a.At = a.At.UTC()
	a.Change = change
	return a, err
}

// Actions returns up to limit entries of the trail after the entry
// afterID, oldest first: a reader pages through it by the last id it got.
func (s *Store) Actions(ctx context.Context, afterID int64, limit int) (_ []seckill.Action, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+actionColumns+` FROM operator_actions
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: the operators' trail: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (seckill.Action, error) { return scanAction(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: the operators' trail: %w", err)
	}
	return out, nil
}

// KeyedChange returns what operator's Idempotency-Key key made, with its
// answer if one was kept; found is false when the key made nothing.
func (s *Store) KeyedChange(ctx context.Context, operator, key string) (_ seckill.KeyedChange, found bool, err error) {
	defer unavailable(&err)
	var kc seckill.KeyedChange
	var status *int
	var contentType *string
	var change []byte
	err = s.pool.QueryRow(ctx, `SELECT a.id, a.at, a.operator, a.action, a.target, a.request_id,
			a.idempotency_key, a.request_sha256, a.change, r.status, r.content_type, r.body
		FROM operator_actions a LEFT JOIN operator_answers r
			ON r.operator = a.operator AND r.idempotency_key = a.idempotency_key
		WHERE a.operator = $1 AND a.idempotency_key = $2`, operator, key).Scan(
		&kc.Action.ID, &kc.Action.At, &kc.Action.Operator, &kc.Action.Kind, &kc.Action.Target, &kc.Action.RequestID,
		&kc.Action.Key, &kc.Action.Request, &change, &status, &contentType, &kc.Answer.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return seckill.KeyedChange{}, false, nil
	}
	if err != nil {
		return seckill.KeyedChange{}, false, fmt.Errorf("pgstore: the change of operator %q's key: %w", operator, err)
	}
	kc.Action.At = kc.Action.At.UTC()
	kc.Action.Change = change
	if status != nil && contentType != nil {
		kc.Answered, kc.Answer.Status, kc.Answer.ContentType = true, *status, *contentType
	}
	return kc, true, nil
}

// SaveAnswer keeps the answer given to operator's keyed change for its
// retries (the first kept wins), and forgets the answers older than a day.
func (s *Store) SaveAnswer(ctx context.Context, operator, key string, a seckill.Answer) (err error) {
	defer unavailable(&err)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO operator_answers (operator, idempotency_key, status, content_type, body)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, operator, key, a.Status, a.ContentType, a.Body)
	b.Queue(`DELETE FROM operator_answers WHERE at < now() - make_interval(secs => $1)`, answerLife.Seconds())
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: keep the answer of operator %q's change: %w", operator, err)
	}
	return nil
}

const operatorColumns = `name, scope, token_sha256, created_at, revoked_at`

func scanOperator(row pgx.Row) (seckill.Operator, error) {
	var op seckill.Operator
	var scope string
	var digest []byte
	var revoked *time.Time
	if err := row.Scan(&op.Name, &scope, &digest, &op.CreatedAt, &revoked); err != nil {
		return seckill.Operator{}, err
	}
	op.Scope = seckill.Scope(scope)
	copy(op.TokenSHA256[:], digest)
	op.CreatedAt = op.CreatedAt.UTC()
	if revoked != nil {
		op.RevokedAt = revoked.UTC()
	}
	return op, nil
}

// AddOperator stores a named operator's credential and records act, its
// creation, in the same transaction. A name already given to a live
// operator is apperr.ErrConflict.
func (s *Store) AddOperator(ctx context.Context, op seckill.Operator, act seckill.Action) (_ seckill.Operator, err error) {
	defer unavailable(&err)
	if err := seckill.ValidateOperatorName(op.Name); err != nil {
		return seckill.Operator{}, err
	}
	if !op.Scope.Valid() {
		return seckill.Operator{}, apperr.Invalidf("the scope is %q or %q", seckill.ScopeRead, seckill.ScopeWrite)
	}
	return retryConflicts(ctx, func() (seckill.Operator, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: add operator %q: %w", op.Name, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
		stored, err := scanOperator(tx.QueryRow(ctx, `INSERT INTO operators (name, scope, token_sha256)
			VALUES ($1, $2, $3) RETURNING `+operatorColumns, op.Name, string(op.Scope), op.TokenSHA256[:]))
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == codeUniqueViolation {
			return seckill.Operator{}, apperr.Publicf(apperr.ErrConflict, "operator %q exists: revoke it first to give the name a new token", op.Name)
		}
		if err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: add operator %q: %w", op.Name, err)
		}
		if _, err := insertAction(ctx, tx, act); err != nil {
			return seckill.Operator{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: add operator %q: commit: %w", op.Name, err)
		}
		return stored, nil
	})
}

// RevokeOperator stops the live operator name's token at once and records
// act, its revocation, in the same transaction. A name with no live token
// is apperr.ErrNotFound.
func (s *Store) RevokeOperator(ctx context.Context, name string, act seckill.Action) (_ seckill.Operator, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (seckill.Operator, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: revoke operator %q: %w", name, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
		op, err := scanOperator(tx.QueryRow(ctx, `UPDATE operators SET revoked_at = now()
			WHERE name = $1 AND revoked_at IS NULL RETURNING `+operatorColumns, name))
		if errors.Is(err, pgx.ErrNoRows) {
			return seckill.Operator{}, apperr.Publicf(apperr.ErrNotFound, "no operator %q has a live token", name)
		}
		if err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: revoke operator %q: %w", name, err)
		}
		if _, err := insertAction(ctx, tx, act); err != nil {
			return seckill.Operator{}, err
		}
		if err := tx.Commit(ctx); err != nil {
			return seckill.Operator{}, fmt.Errorf("pgstore: revoke operator %q: commit: %w", name, err)
		}
		return op, nil
	})
}

// Operators lists the operators' credentials, oldest first: only the live
// ones, or the revoked too.
func (s *Store) Operators(ctx context.Context, withRevoked bool) (_ []seckill.Operator, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+operatorColumns+` FROM operators
		WHERE $1 OR revoked_at IS NULL ORDER BY id`, withRevoked)
	if err != nil {
		return nil, fmt.Errorf("pgstore: operators: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (seckill.Operator, error) { return scanOperator(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: operators: %w", err)
	}
	return out, nil
}

// LiveOperators returns the live operators by their token's SHA-256: what
// the gateway recognises a token by.
func (s *Store) LiveOperators(ctx context.Context) (map[[sha256.Size]byte]seckill.Operator, error) {
	ops, err := s.Operators(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make(map[[sha256.Size]byte]seckill.Operator, len(ops))
	for _, op := range ops {
		out[op.TokenSHA256] = op
	}
	return out, nil
}
