package pgstore_test

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Named operators: a token is kept as its SHA-256 only, a live name is
// given once, a revoked token stops at once and its name may be given
// again; each add and revoke is in the trail, written with it.
func TestOperatorsNamedAndRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	s := pgstore.New(pool)

	tok, digest := seckill.NewOperatorToken()
	add := func(name string, scope seckill.Scope, digest [sha256.Size]byte) (seckill.Operator, error) {
		return s.AddOperator(ctx, seckill.Operator{Name: name, Scope: scope, TokenSHA256: digest},
			seckill.Action{Operator: "cli:ops", Kind: seckill.ActionAddOperator, Target: "operator:" + name})
	}
	alice, err := add("alice", seckill.ScopeWrite, digest)
	require.NoError(t, err)
	require.Equal(t, "alice", alice.Name)
	require.True(t, alice.RevokedAt.IsZero())
	_, bobDigest := seckill.NewOperatorToken()
	_, err = add("bob", seckill.ScopeRead, bobDigest)
	require.NoError(t, err)

	_, otherDigest := seckill.NewOperatorToken()
	_, err = add("alice", seckill.ScopeRead, otherDigest)
	require.ErrorIs(t, err, apperr.ErrConflict, "a live name is given once")
	_, err = add("root", seckill.ScopeRead, otherDigest)
	require.ErrorIs(t, err, apperr.ErrInvalidInput, "root is SECKILL_ADMIN_TOKEN's name")
	_, err = add("Alice Smith", seckill.ScopeRead, otherDigest)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
	_, err = add("carol", "admin", otherDigest)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)

	live, err := s.LiveOperators(ctx)
	require.NoError(t, err)
	require.Len(t, live, 2)
	require.Equal(t, "alice", live[sha256.Sum256([]byte(tok))].Name, "recognised by the token's digest")
	require.Equal(t, seckill.ScopeRead, live[bobDigest].Scope)
	var stored int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM operators WHERE token_sha256 = $1::bytea`,
		[]byte(tok)).Scan(&stored))
	require.Zero(t, stored, "the token itself is nowhere")

	revoked, err := s.RevokeOperator(ctx, "alice", seckill.Action{Operator: "root", Kind: seckill.ActionRevokeOperator, Target: "operator:alice"})
	require.NoError(t, err)
	require.False(t, revoked.RevokedAt.IsZero())
	_, err = s.RevokeOperator(ctx, "alice", seckill.Action{Operator: "root", Kind: seckill.ActionRevokeOperator, Target: "operator:alice"})
	require.ErrorIs(t, err, apperr.ErrNotFound, "no live token left")
	live, err = s.LiveOperators(ctx)
	require.NoError(t, err)
	require.NotContains(t, live, digest, "revoked at once")
	_, err = add("alice", seckill.ScopeRead, otherDigest)
	require.NoError(t, err, "the name may be given again")
	all, err := s.Operators(ctx, true)
	require.NoError(t, err)
	require.Len(t, all, 3)

	trail, err := s.Actions(ctx, 0, 100)
	require.NoError(t, err)
	var kinds []string
	for _, a := range trail {
		kinds = append(kinds, a.Operator+" "+a.Kind+" "+a.Target)
	}
	require.Equal(t, []string{
		"cli:ops operator.add operator:alice", "cli:ops operator.add operator:bob",
		"root operator.revoke operator:alice", "cli:ops operator.add operator:alice",
	}, kinds, "every add and revoke that took, none that was refused")
}
