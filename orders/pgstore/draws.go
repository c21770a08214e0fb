package pgstore

// The draws' record (seckill/draw.Record): tables draw_commitments
// (append-only), draws and draw_entries (migrations/013_draw_beacon.sql).

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/seckill/draw"
)

var _ draw.Record = (*Store)(nil)

// Commit records a draw's commitment of kind unless one is, and answers
// the one recorded.
func (s *Store) Commit(ctx context.Context, voucherID int64, kind string, body []byte) (_ draw.Commitment, err error) {
	defer unavailable(&err)
	if _, err := s.pool.Exec(ctx, `INSERT INTO draw_commitments (voucher_id, kind, body) VALUES ($1, $2, $3)
		ON CONFLICT (voucher_id, kind) DO NOTHING`, voucherID, kind, body); err != nil {
		return draw.Commitment{}, fmt.Errorf("pgstore: commit the draw of voucher %d: %w", voucherID, err)
	}
	c := draw.Commitment{Kind: kind}
	if err := s.pool.QueryRow(ctx, `SELECT body::text, committed_at FROM draw_commitments WHERE voucher_id = $1 AND kind = $2`,
		voucherID, kind).Scan(&c.Body, &c.At); err != nil {
		return draw.Commitment{}, fmt.Errorf("pgstore: read the draw commitment of voucher %d: %w", voucherID, err)
	}
	return c, nil
}

// Commitments are the commitments of ids' draws, oldest first.
func (s *Store) Commitments(ctx context.Context, ids ...int64) (_ map[int64][]draw.Commitment, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT voucher_id, kind, body::text, committed_at FROM draw_commitments
		WHERE voucher_id = ANY($1) ORDER BY seq`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: draw commitments: %w", err)
	}
	out := make(map[int64][]draw.Commitment, len(ids))
	var id int64
	var c draw.Commitment
	_, err = pgx.ForEachRow(rows, []any{&id, &c.Kind, &c.Body, &c.At}, func() error {
		out[id] = append(out[id], draw.Commitment{Kind: c.Kind, Body: append([]byte(nil), c.Body...), At: c.At})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: draw commitments: %w", err)
	}
	return out, nil
}

const drawCols = `opened_at, coalesce(void_reason, ''), coalesce(signature, ''), coalesce(entries, 0), coalesce(winners, 0), coalesce(cutoff, '')`

func scanState(row pgx.Row, st *draw.State) error {
	return row.Scan(&st.OpenedAt, &st.Void, &st.Signature, &st.Entries, &st.Winners, &st.Cutoff)
}

// OpenDraw records that a draw's entries opened, unless recorded.
func (s *Store) OpenDraw(ctx context.Context, voucherID int64) (st draw.State, fresh bool, err error) {
	defer unavailable(&err)
	tag, err := s.pool.Exec(ctx, `INSERT INTO draws (voucher_id) VALUES ($1) ON CONFLICT (voucher_id) DO NOTHING`, voucherID)
	if err != nil {
		return st, false, fmt.Errorf("pgstore: open the draw of voucher %d: %w", voucherID, err)
	}
	if err := scanState(s.pool.QueryRow(ctx, `SELECT `+drawCols+` FROM draws WHERE voucher_id = $1`, voucherID), &st); err != nil {
		return st, false, fmt.Errorf("pgstore: read the draw of voucher %d: %w", voucherID, err)
	}
	return st, tag.RowsAffected() == 1, nil
}

// DrawStates are the states of ids' draws.
func (s *Store) DrawStates(ctx context.Context, ids ...int64) (_ map[int64]draw.State, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT voucher_id, `+drawCols+` FROM draws WHERE voucher_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: draws: %w", err)
	}
	out := make(map[int64]draw.State, len(ids))
	var id int64
	var st draw.State
	_, err = pgx.ForEachRow(rows, []any{&id, &st.OpenedAt, &st.Void, &st.Signature, &st.Entries, &st.Winners, &st.Cutoff}, func() error {
		out[id] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: draws: %w", err)
	}
	return out, nil
}

// VoidDraw ends a draw as void, unless it ended.
func (s *Store) VoidDraw(ctx context.Context, voucherID int64, why string) (err error) {
	defer unavailable(&err)
	_, err = s.pool.Exec(ctx, `INSERT INTO draws (voucher_id, void_reason, ended_at) VALUES ($1, $2, now())
		ON CONFLICT (voucher_id) DO UPDATE SET void_reason = $2, ended_at = now()
		WHERE draws.ended_at IS NULL`, voucherID, why)
	if err != nil {
		return fmt.Errorf("pgstore: void the draw of voucher %d: %w", voucherID, err)
	}
	return nil
}

// EndDraw ends a draw as drawn, unless it ended.
func (s *Store) EndDraw(ctx context.Context, voucherID int64, st draw.State) (err error) {
	defer unavailable(&err)
	_, err = s.pool.Exec(ctx, `INSERT INTO draws (voucher_id, signature, entries, winners, cutoff, ended_at)
		VALUES ($1, $2, $3, $4, nullif($5, ''), now())
		ON CONFLICT (voucher_id) DO UPDATE SET signature = $2, entries = $3, winners = $4, cutoff = nullif($5, ''), ended_at = now()
		WHERE draws.ended_at IS NULL`, voucherID, st.Signature, st.Entries, st.Winners, st.Cutoff)
	if err != nil {
		return fmt.Errorf("pgstore: end the draw of voucher %d: %w", voucherID, err)
	}
	return nil
}

// SaveEntries records a draw's frozen entries.
func (s *Store) SaveEntries(ctx context.Context, voucherID int64, entries []draw.Entry) (err error) {
	defer unavailable(&err)
	ids, users := make([]string, len(entries)), make([]int64, len(entries))
	for i, e := range entries {
		ids[i], users[i] = e.EntryID, e.UserID
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO draw_entries (voucher_id, entry_id, user_id)
		SELECT $1, e, u FROM unnest($2::text[], $3::bigint[]) AS x(e, u)
		ON CONFLICT DO NOTHING`, voucherID, ids, users)
	if err != nil {
		return fmt.Errorf("pgstore: save the entries of voucher %d: %w", voucherID, err)
	}
	return nil
}

// Entries are a draw's recorded entries.
func (s *Store) Entries(ctx context.Context, voucherID int64) (_ []draw.Entry, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT entry_id, user_id FROM draw_entries WHERE voucher_id = $1`, voucherID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: entries of voucher %d: %w", voucherID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (draw.Entry, error) {
		var e draw.Entry
		return e, row.Scan(&e.EntryID, &e.UserID)
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: entries of voucher %d: %w", voucherID, err)
	}
	return out, nil
}
