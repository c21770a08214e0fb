package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/orders/pgstore/pgstoretest"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// The trail is append-only, paged by id, and one operator's
// Idempotency-Key makes one change, ever: in the change's own transaction,
// so a voucher change whose key was used changes nothing anywhere (its
// fast-store step is never called). The answer kept is found by the key.
func TestTrailKeysAndAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	s := pgstore.New(pool)
	v := pgstoretest.NewVoucher(t, s, 10, 1)

	req := sha256.Sum256([]byte("PATCH /api/v1/admin/vouchers/1 {\"add_stock\":5}"))
	act := seckill.Action{Operator: "alice", Kind: seckill.ActionChangeVoucher, Target: "voucher:1",
		RequestID: "rid-1", Key: "k1", Request: req[:], Change: json.RawMessage(`{"add_stock":5}`)}
	_, err := s.ChangeVoucher(ctx, v.ID, seckill.Change{AddStock: 5, By: "alice"}, &act, nil)
	require.NoError(t, err)
	steps := 0
	_, err = s.ChangeVoucher(ctx, v.ID, seckill.Change{AddStock: 5, By: "alice"}, &act,
		func(context.Context, seckill.Voucher, seckill.Voucher) error { steps++; return nil })
	require.ErrorIs(t, err, seckill.ErrKeyUsed)
	require.ErrorIs(t, err, apperr.ErrConflict)
	require.Zero(t, steps, "the fast store is not changed for a used key")
	after, err := s.Voucher(ctx, v.ID)
	require.NoError(t, err)
	require.EqualValues(t, 15, after.StockTotal, "the stock was added once")
	changes, err := s.VoucherChanges(ctx, v.ID)
	require.NoError(t, err)
	require.Len(t, changes, 1)

	bob := act
	bob.Operator = "bob"
	_, err = s.SetVoucherPaused(ctx, v.ID, true, &bob)
	require.NoError(t, err, "keys are per operator")
	_, err = s.SetVoucherPaused(ctx, v.ID, false, &bob)
	require.ErrorIs(t, err, seckill.ErrKeyUsed)
	paused, err := s.Voucher(ctx, v.ID)
	require.NoError(t, err)
	require.True(t, paused.Paused, "the second change with the key did nothing")
	_, err = s.CreateVoucher(ctx, seckill.Voucher{Title: "x", Kind: seckill.KindSeckill, PriceCents: 1, StockTotal: 1,
		PerUserLimit: 1, BeginAt: v.BeginAt, EndAt: v.EndAt}, &bob, nil)
	require.ErrorIs(t, err, seckill.ErrKeyUsed)
	all, err := s.Vouchers(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1, "nothing was created")
	_, err = s.RecordAction(ctx, seckill.Action{Operator: "bob", Kind: seckill.ActionSwitchBreaker, Target: "breaker", Key: "k1"})
	require.ErrorIs(t, err, seckill.ErrKeyUsed)

	kc, found, err := s.KeyedChange(ctx, "alice", "k1")
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, kc.Answered, "no answer kept yet")
	require.Equal(t, req[:], kc.Action.Request)
	require.Equal(t, "rid-1", kc.Action.RequestID)
	require.JSONEq(t, `{"add_stock":5}`, string(kc.Action.Change))
	require.NoError(t, s.SaveAnswer(ctx, "alice", "k1", seckill.Answer{Status: 200, ContentType: "application/json", Body: []byte(`{"a":1}`)}))
	require.NoError(t, s.SaveAnswer(ctx, "alice", "k1", seckill.Answer{Status: 500, ContentType: "text/plain", Body: []byte(`late`)}))
	kc, _, err = s.KeyedChange(ctx, "alice", "k1")
	require.NoError(t, err)
	require.True(t, kc.Answered)
	require.Equal(t, seckill.Answer{Status: 200, ContentType: "application/json", Body: []byte(`{"a":1}`)}, kc.Answer, "the first answer kept wins")
	_, found, err = s.KeyedChange(ctx, "carol", "k1")
	require.NoError(t, err)
	require.False(t, found)

	for range 3 {
		_, err := s.RecordAction(ctx, seckill.Action{Operator: "root", Kind: seckill.ActionSwitchBreaker, Target: "breaker",
			Change: json.RawMessage(`{"mode":"open"}`)})
		require.NoError(t, err, "changes without a key never collide")
	}
	first, err := s.Actions(ctx, 0, 3)
	require.NoError(t, err)
	require.Len(t, first, 3)
	rest, err := s.Actions(ctx, first[2].ID, 100)
	require.NoError(t, err)
	require.Len(t, rest, 2, "5 entries in all, paged by id")
	require.Greater(t, rest[0].ID, first[2].ID)
	require.Equal(t, seckill.ActionSwitchBreaker, rest[1].Kind)

	for _, sql := range []string{`UPDATE operator_actions SET operator = 'nobody'`, `DELETE FROM operator_actions`, `TRUNCATE operator_actions`} {
		_, err := pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, sql)
		require.Contains(t, pgErr.Message, "append-only", sql)
	}
	again, err := s.Actions(ctx, 0, 100)
	require.NoError(t, err)
	require.Len(t, again, 5)
}
