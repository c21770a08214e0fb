package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill/draw"
)

// TestDrawRecord: a draw's commitments are the first of each kind, oldest
// first, and no statement can change or remove one; the opening is
// recorded once; a draw ends once, made or void.
func TestDrawRecord(t *testing.T) {
	ctx := context.Background()
	pool := stack.NewDatabase(t)
	s := pgstore.New(pool)
	const id = 91

	first, err := s.Commit(ctx, id, draw.KindBeacon, []byte(`{"round": 7}`))
	require.NoError(t, err)
	again, err := s.Commit(ctx, id, draw.KindBeacon, []byte(`{"round": 8}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"round": 7}`, string(again.Body), "the first commitment of a kind stands")
	assert.Equal(t, first.At, again.At)
	_, err = s.Commit(ctx, id, draw.KindEntriesHash, []byte(`{"entries_hash": "ab"}`))
	require.NoError(t, err)
	all, err := s.Commitments(ctx, id)
	require.NoError(t, err)
	require.Len(t, all[id], 2)
	assert.Equal(t, draw.KindBeacon, all[id][0].Kind, "oldest first")
	assert.Equal(t, draw.KindEntriesHash, all[id][1].Kind)
	for _, sql := range []string{`UPDATE draw_commitments SET body = '{"round": 9}'`, `DELETE FROM draw_commitments`, `TRUNCATE draw_commitments`} {
		_, err := pool.Exec(ctx, sql)
		require.Error(t, err, sql)
		assert.Contains(t, err.Error(), "append-only", sql)
	}
	all, err = s.Commitments(ctx, id)
	require.NoError(t, err)
	assert.Len(t, all[id], 2)

	st, fresh, err := s.OpenDraw(ctx, id)
	require.NoError(t, err)
	assert.True(t, fresh)
	assert.False(t, st.Ended())
	_, fresh, err = s.OpenDraw(ctx, id)
	require.NoError(t, err)
	assert.False(t, fresh, "opened once")

	require.NoError(t, s.VoidDraw(ctx, id, "lost"))
	require.NoError(t, s.EndDraw(ctx, id, draw.State{Signature: "aa", Entries: 3, Winners: 1, Cutoff: "cc"}))
	states, err := s.DrawStates(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "lost", states[id].Void, "a void draw is never drawn after")
	assert.Empty(t, states[id].Signature)

	require.NoError(t, s.SaveEntries(ctx, id, []draw.Entry{{EntryID: "e1", UserID: 1}, {EntryID: "e2", UserID: 2}}))
	require.NoError(t, s.SaveEntries(ctx, id, []draw.Entry{{EntryID: "e1", UserID: 1}}))
	entries, err := s.Entries(ctx, id)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "saving an entry again changes nothing")
}
