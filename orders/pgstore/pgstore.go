// Package pgstore keeps the platform's record in PostgreSQL: users,
// vouchers and orders, and each sale's per-second figures (the Store of
// orders/salereport).
//
// It sits under orders because most of what it writes is orders. The users
// and vouchers live here too, because an order's transaction takes the
// voucher's stock and counts the user's buys in the same statements.
// PostgreSQL is the record of the platform: the conditional statements here
// keep stock from going below zero and users within their limit even when
// every layer above fails.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Store reads and writes users, vouchers and orders over a pgx pool. Every
// method's error wraps apperr.ErrUnavailable when PostgreSQL could not be
// reached or did not answer in time (see unavailable).
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store over pool. The pool stays the caller's to close.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool}
}

// Pool returns the underlying pool (for health checks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// User is a registered shopper.
type User struct {
	ID           int64
	Username     string
	PasswordHash string
}

// PostgreSQL error codes this package tells apart.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// conflictAttempts is how many times a transaction that lost a deadlock or
// a serialization conflict is run in all before its caller is told 503.
const conflictAttempts = 4

// conflictBackoff is the first wait between two attempts; each later wait
// is up to twice the one before, and each is drawn at random below its
// bound (full jitter), so two transactions that deadlocked each other do
// not meet again at the same instant.
const conflictBackoff = 4 * time.Millisecond

// conflicted reports whether err is PostgreSQL aborting the transaction to
// break a deadlock or a serialization conflict: nothing was written, and
// running the same transaction again is the documented remedy.
func conflicted(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pgErr.Code == codeDeadlockDetected || pgErr.Code == codeSerializationFailure)
}

// retryConflicts runs tx, one whole transaction, again while PostgreSQL
// aborts it for a deadlock or a serialization failure, up to
// conflictAttempts times with jittered waits. This is the one place such
// conflicts are handled: every transaction of the store runs through it.
// When they persist, the error wraps apperr.ErrUnavailable (503 with
// Retry-After: the database is too contended right now, which is not the
// client's fault and not an internal error). tx must start from scratch on
// every call.
func retryConflicts[T any](ctx context.Context, tx func() (T, error)) (T, error) {
	wait := conflictBackoff
	for attempt := 1; ; attempt++ {
		v, err := tx()
		if err == nil || !conflicted(err) {
			return v, err
		}
		if attempt == conflictAttempts {
			return v, fmt.Errorf("%w: gave up after %d attempts: %w", apperr.ErrUnavailable, attempt, err)
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(wait))) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return v, err
		}
		wait *= 2
	}
}

// unavailable marks *errp with apperr.ErrUnavailable when it says PostgreSQL
// could not be reached or did not answer in time, keeping err in the chain.
// Every exported method defers it on its error result, so the
// gateway answers a database outage with 503 unavailable instead of 500, and
// the buying path can tell "the record is down" from "the record said no".
// Anything else (constraint violations, bad data, not found) is returned as
// it is, with the sentinel it already wraps.
func unavailable(errp *error) {
	if err := *errp; err != nil && !errors.Is(err, apperr.ErrUnavailable) && (unreachable(err) || conflicted(err)) {
		*errp = fmt.Errorf("%w: %w", apperr.ErrUnavailable, err)
	}
}

// unreachable reports whether err means the database was not there to ask:
// no connection (refused, reset, closed, pool closed, or the server would not
// let us in), no answer in time, or the server refusing to work right now
// (shutting down, starting up, out of connections). A caller that gave up
// (context.Canceled) is not an outage.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// Whatever the server said while we connected (wrong password,
		// no such database), this request cannot be served by it.
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		// The server answered. Only these classes say it cannot serve now:
		// 08 connection exception, 57 operator intervention (admin or crash
		// shutdown, cannot connect now, statement timeout), 53300 too many
		// connections. Every other code is about the statement or its data.
		class := pgErr.Code[:min(2, len(pgErr.Code))]
		return class == "08" || class == "57" || pgErr.Code == "53300"
	}
	_, isNet := errors.AsType[net.Error](err)
	return isNet ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err)
}

// CreateUser stores a new user and returns its id. A name in use returns an
// error wrapping apperr.ErrUsernameTaken.
func (s *Store) CreateUser(ctx context.Context, username, passwordHash string) (_ int64, err error) {
	defer unavailable(&err)
	var id int64
	err = s.pool.QueryRow(ctx,
		`INSERT INTO users (username, password_hash) VALUES ($1, $2) RETURNING id`,
		username, passwordHash).Scan(&id)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			switch {
			case pgErr.Code == codeUniqueViolation:
				return 0, fmt.Errorf("pgstore: user %q: %w", username, apperr.ErrUsernameTaken)
			case pgErr.Code == "23514": // check_violation: the name's length
				return 0, fmt.Errorf("pgstore: user %q: %w: %s", username, apperr.ErrInvalidInput, pgErr.Message)
			}
		}
		return 0, fmt.Errorf("pgstore: create user: %w", err)
	}
	return id, nil
}

// UserByName returns the user called username, or an error wrapping
// apperr.ErrNotFound.
func (s *Store) UserByName(ctx context.Context, username string) (_ User, err error) {
	defer unavailable(&err)
	var u User
	err = s.pool.QueryRow(ctx,
		`SELECT id, username, password_hash FROM users WHERE username = $1`, username).
		Scan(&u.ID, &u.Username, &u.PasswordHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, fmt.Errorf("pgstore: user %q: %w", username, apperr.ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("pgstore: user by name: %w", err)
	}
	return u, nil
}

const voucherColumns = `id, title, kind, price_cents, stock_total, stock_left, per_user_limit,
	begin_at, end_at, captcha_required, created_at, paused, shards,
	room_admit_per_second, room_prequeue_seconds,
	room_target_p99_ms, room_min_per_second, room_max_per_second,
	room_mode, room_draw_pass_seconds, entry_token_required, entry_allowlist, challenge_pow, room_draw_hold,
	coalesce(currency, ''), grace_seconds`

func scanVoucher(row pgx.Row) (seckill.Voucher, error) {
	var v seckill.Voucher
	var kind string
	var admit, prequeue, target, minRate, maxRate *int64
	var mode string
	var drawPass int64
	var drawHold bool
	var entry seckill.EntryRule
	err := row.Scan(&v.ID, &v.Title, &kind, &v.PriceCents, &v.StockTotal, &v.StockLeft,
		&v.PerUserLimit, &v.BeginAt, &v.EndAt, &v.CaptchaRequired, &v.CreatedAt, &v.Paused, &v.Shards,
		&admit, &prequeue, &target, &minRate, &maxRate, &mode, &drawPass, &entry.TokenRequired, &entry.Allowlist, &v.ProofOfWork, &drawHold,
		&v.Currency, &v.GraceSeconds)
	if entry.TokenRequired || entry.Allowlist {
		v.Entry = &entry
	}
	if admit != nil && prequeue != nil {
		v.WaitingRoom = &seckill.WaitingRoom{AdmitPerSecond: *admit, PrequeueSeconds: *prequeue}
		if target != nil && minRate != nil && maxRate != nil {
			v.WaitingRoom.Adaptive = &seckill.Adaptive{TargetP99Ms: *target, MinPerSecond: *minRate, MaxPerSecond: *maxRate}
		}
		if mode == string(seckill.RoomDraw) {
			v.WaitingRoom.Mode, v.WaitingRoom.DrawPassSeconds = seckill.RoomDraw, drawPass
			v.WaitingRoom.DrawHold = drawHold
		}
	}
	v.Kind = seckill.Kind(kind)
	v.BeginAt, v.EndAt, v.CreatedAt = v.BeginAt.UTC(), v.EndAt.UTC(), v.CreatedAt.UTC()
	return v, err
}

// roomAdmit and roomPrequeue are a waiting room's columns, NULL without one.
func roomAdmit(r *seckill.WaitingRoom) *int64 {
	if r == nil {
		return nil
	}
	return &r.AdmitPerSecond
}

func roomPrequeue(r *seckill.WaitingRoom) *int64 {
	if r == nil {
		return nil
	}
	return &r.PrequeueSeconds
}

// roomAdaptive is an adaptive room's columns (target, min, max), all NULL
// for a fixed rate or no room.
func roomAdaptive(r *seckill.WaitingRoom) (target, minRate, maxRate *int64) {
	if r == nil || r.Adaptive == nil {
		return nil, nil, nil
	}
	return &r.Adaptive.TargetP99Ms, &r.Adaptive.MinPerSecond, &r.Adaptive.MaxPerSecond
}

// roomMode and roomDrawPass are a room's draw columns ('line' and 0
// without a draw).
func roomMode(r *seckill.WaitingRoom) string {
	if r.IsDraw() {
		return string(seckill.RoomDraw)
	}
	return string(seckill.RoomLine)
}

func roomDrawPass(r *seckill.WaitingRoom) int64 {
	if r.IsDraw() {
		return r.DrawPassSeconds
	}
	return 0
}

// CreateVoucher validates and stores v (its ID, StockLeft and CreatedAt are
// set by the store) in a transaction, calls beforeCommit with the stored
// voucher, and commits only if beforeCommit returned nil. The caller warms
// Redis in beforeCommit: if that fails the voucher does not exist anywhere
// PostgreSQL is asked, and a Redis entry it left behind belongs to an id no
// order can be persisted for (it ends failed). beforeCommit may be nil.
// act, when not nil, is the operator's creation, appended to the trail in
// the same transaction with the new voucher as its target (an
// Idempotency-Key that made a change already: seckill.ErrKeyUsed, and
// nothing is created).
func (s *Store) CreateVoucher(ctx context.Context, v seckill.Voucher, act *seckill.Action,
	beforeCommit func(context.Context, seckill.Voucher) error) (_ seckill.Voucher, err error) {
	defer unavailable(&err)
	if err := v.Validate(); err != nil {
		return seckill.Voucher{}, err
	}
	return retryConflicts(ctx, func() (seckill.Voucher, error) { return s.createVoucher(ctx, v, act, beforeCommit) })
}

func (s *Store) createVoucher(ctx context.Context, v seckill.Voucher, act *seckill.Action,
	beforeCommit func(context.Context, seckill.Voucher) error) (seckill.Voucher, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: create voucher: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	target, minRate, maxRate := roomAdaptive(v.WaitingRoom)
	stored, err := scanVoucher(tx.QueryRow(ctx, `
		INSERT INTO vouchers (title, kind, price_cents, stock_total, stock_left, per_user_limit,
			begin_at, end_at, captcha_required, shards, room_admit_per_second, room_prequeue_seconds,
			room_target_p99_ms, room_min_per_second, room_max_per_second, room_mode, room_draw_pass_seconds,
			entry_token_required, entry_allowlist, challenge_pow, room_draw_hold, currency, grace_seconds)
		VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)
		RETURNING `+voucherColumns,
		v.Title, string(v.Kind), v.PriceCents, v.StockTotal, v.PerUserLimit, v.BeginAt, v.EndAt, v.CaptchaRequired,
		v.ShardCount(), roomAdmit(v.WaitingRoom), roomPrequeue(v.WaitingRoom), target, minRate, maxRate,
		roomMode(v.WaitingRoom), roomDrawPass(v.WaitingRoom), v.Entry != nil && v.Entry.TokenRequired,
		v.Entry != nil && v.Entry.Allowlist, v.ProofOfWork, v.WaitingRoom.IsDraw() && v.WaitingRoom.DrawHold,
		nonEmptyText(v.Currency), v.GraceSeconds))
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: create voucher: %w", err)
	}
	if act != nil {
		a := *act
		a.Target = voucherTarget(stored.ID)
		if _, err := insertAction(ctx, tx, a); err != nil {
			return seckill.Voucher{}, err
		}
	}
	if beforeCommit != nil {
		if err := beforeCommit(ctx, stored); err != nil {
			return seckill.Voucher{}, fmt.Errorf("pgstore: create voucher %d: before commit: %w", stored.ID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: create voucher %d: commit: %w", stored.ID, err)
	}
	return stored, nil
}

// Voucher returns voucher id with PostgreSQL's stock_left, or an error
// wrapping apperr.ErrNotFound.
func (s *Store) Voucher(ctx context.Context, id int64) (_ seckill.Voucher, err error) {
	defer unavailable(&err)
	v, err := scanVoucher(s.pool.QueryRow(ctx, `SELECT `+voucherColumns+` FROM vouchers WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return seckill.Voucher{}, fmt.Errorf("pgstore: voucher %d: %w", id, apperr.ErrNotFound)
	}
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: voucher %d: %w", id, err)
	}
	return v, nil
}

// SetVoucherPaused records the operator's pause of voucher id (or its end)
// and returns the voucher, or an error wrapping apperr.ErrNotFound. act,
// when not nil, is the operator's change, appended to the trail in the
// same transaction (a used Idempotency-Key: seckill.ErrKeyUsed, and
// nothing changes).
func (s *Store) SetVoucherPaused(ctx context.Context, id int64, paused bool, act *seckill.Action) (_ seckill.Voucher, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (seckill.Voucher, error) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return seckill.Voucher{}, fmt.Errorf("pgstore: pause voucher %d: %w", id, err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit
		v, err := scanVoucher(tx.QueryRow(ctx,
			`UPDATE vouchers SET paused = $2 WHERE id = $1 RETURNING `+voucherColumns, id, paused))
		if errors.Is(err, pgx.ErrNoRows) {
			return seckill.Voucher{}, fmt.Errorf("pgstore: voucher %d: %w", id, apperr.ErrNotFound)
		}
		if err != nil {
			return seckill.Voucher{}, fmt.Errorf("pgstore: pause voucher %d: %w", id, err)
		}
		if act != nil {
			if _, err := insertAction(ctx, tx, *act); err != nil {
				return seckill.Voucher{}, err
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return seckill.Voucher{}, fmt.Errorf("pgstore: pause voucher %d: commit: %w", id, err)
		}
		return v, nil
	})
}

// voucherTarget names voucher id in the operators' trail.
func voucherTarget(id int64) string { return fmt.Sprintf("voucher:%d", id) }

// ChangeVoucher steers voucher id's running sale (seckill.Change): in one
// transaction it locks the row, judges the change by PostgreSQL's clock
// (an ended sale is ErrConflict, a value that does not fit ErrInvalidInput),
// adds the stock to stock_total and stock_left alike (the workers' and the
// sweeper's updates of stock_left wait for the lock, so none is lost), sets
// the end and the room's rate, and calls beforeCommit with the voucher
// before and after; it commits only if that returned nil. Unknown id:
// ErrNotFound. act, when not nil, is the operator's change, appended to the
// trail in the same transaction before beforeCommit runs (a used
// Idempotency-Key: seckill.ErrKeyUsed, and nothing changes anywhere).
func (s *Store) ChangeVoucher(ctx context.Context, id int64, change seckill.Change, act *seckill.Action,
	beforeCommit func(ctx context.Context, before, after seckill.Voucher) error) (_ seckill.Voucher, err error) {
	defer unavailable(&err)
	return retryConflicts(ctx, func() (seckill.Voucher, error) { return s.changeVoucher(ctx, id, change, act, beforeCommit) })
}

func (s *Store) changeVoucher(ctx context.Context, id int64, change seckill.Change, act *seckill.Action,
	beforeCommit func(ctx context.Context, before, after seckill.Voucher) error) (seckill.Voucher, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: %w", id, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after commit

	before, err := scanVoucher(tx.QueryRow(ctx, `SELECT `+voucherColumns+` FROM vouchers WHERE id = $1 FOR NO KEY UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return seckill.Voucher{}, fmt.Errorf("pgstore: voucher %d: %w", id, apperr.ErrNotFound)
	}
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: %w", id, err)
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: %w", id, err)
	}
	want, err := change.Apply(before, now)
	if err != nil {
		return seckill.Voucher{}, err
	}
	after, err := scanVoucher(tx.QueryRow(ctx, `
		UPDATE vouchers SET stock_total = stock_total + $2, stock_left = stock_left + $2,
			end_at = $3, room_admit_per_second = $4, grace_seconds = $5
		WHERE id = $1 RETURNING `+voucherColumns,
		id, change.AddStock, want.EndAt, roomAdmit(want.WaitingRoom), want.GraceSeconds))
	if err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: %w", id, err)
	}
	var endAt *time.Time
	if !change.EndAt.IsZero() {
		endAt = &after.EndAt
	}
	if _, err := tx.Exec(ctx, `INSERT INTO voucher_changes (voucher_id, at, operator, add_stock, admit_per_second, end_at, stock_total)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, now, change.By, change.AddStock, change.AdmitPerSecond, endAt, after.StockTotal); err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: record the change of voucher %d: %w", id, err)
	}
	if act != nil {
		if _, err := insertAction(ctx, tx, *act); err != nil {
			return seckill.Voucher{}, err
		}
	}
	if beforeCommit != nil {
		if err := beforeCommit(ctx, before, after); err != nil {
			return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: before commit: %w", id, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return seckill.Voucher{}, fmt.Errorf("pgstore: change voucher %d: commit: %w", id, err)
	}
	return after, nil
}

// VoucherChanges lists the changes made to voucher id, oldest first.
func (s *Store) VoucherChanges(ctx context.Context, id int64) (_ []seckill.ChangeRecord, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT at, operator, add_stock, admit_per_second, end_at, stock_total
		FROM voucher_changes WHERE voucher_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("pgstore: changes of voucher %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (seckill.ChangeRecord, error) {
		var r seckill.ChangeRecord
		var end *time.Time
		err := row.Scan(&r.At, &r.By, &r.AddStock, &r.AdmitPerSecond, &end, &r.StockTotal)
		if end != nil {
			r.EndAt = end.UTC()
		}
		r.At = r.At.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: changes of voucher %d: %w", id, err)
	}
	return out, nil
}

// Vouchers returns every voucher, newest first.
func (s *Store) Vouchers(ctx context.Context) (_ []seckill.Voucher, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT `+voucherColumns+` FROM vouchers ORDER BY id DESC`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: vouchers: %w", err)
	}
	vs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (seckill.Voucher, error) { return scanVoucher(row) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: vouchers: %w", err)
	}
	return vs, nil
}

// AllPaid reports, of the given vouchers, which have every unit paid for:
// no stock left and no order waiting for payment, so no unit can come back
// (a cancel or a payment timeout would give one). A unit held in Redis but
// not yet persisted is still stock_left here, so it counts as not paid. One
// query on orders_voucher_idx whatever the number of vouchers; an unknown id
// is false.
func (s *Store) AllPaid(ctx context.Context, voucherIDs ...int64) (_ map[int64]bool, err error) {
	defer unavailable(&err)
	out := make(map[int64]bool, len(voucherIDs))
	if len(voucherIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `
		SELECT v.id FROM vouchers v
		WHERE v.id = ANY($1) AND v.stock_left = 0
			AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.voucher_id = v.id AND o.status = 'created')`, voucherIDs)
	if err != nil {
		return nil, fmt.Errorf("pgstore: all paid: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("pgstore: all paid: %w", err)
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// ActiveSeckillVoucherIDs returns the ids of seckill vouchers whose sale
// window ends after since, newest first: the vouchers that can have live
// Redis holds when since is now minus the reservation grace period.
func (s *Store) ActiveSeckillVoucherIDs(ctx context.Context, since time.Time) (_ []int64, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx,
		`SELECT id FROM vouchers WHERE kind = 'seckill' AND end_at > $1 ORDER BY id DESC`, since)
	if err != nil {
		return nil, fmt.Errorf("pgstore: active vouchers: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("pgstore: active vouchers: %w", err)
	}
	return ids, nil
}

// nonEmptyText is s, or NULL for "" (a voucher's currency left to the
// configured one).
func nonEmptyText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
