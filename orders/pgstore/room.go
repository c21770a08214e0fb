package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/seckill/seckill/waitroom"
)

var _ waitroom.Copy = (*Store)(nil)

// SaveRoom records a batch of a room's journal (waitroom.Mirror): new places
// first, then the admissions, in one transaction of two statements whatever
// the batch's size. Saving a batch again changes nothing.
func (s *Store) SaveRoom(ctx context.Context, voucherID int64, joined, admitted []waitroom.Saved) (err error) {
	defer unavailable(&err)
	users, places := make([]int64, len(joined)), make([]int64, len(joined))
	for i, p := range joined {
		users[i], places[i] = p.UserID, p.Score
	}
	admittedUsers, expiries := make([]int64, len(admitted)), make([]int64, len(admitted))
	for i, p := range admitted {
		admittedUsers[i], expiries[i] = p.UserID, p.PassExpiresAt.UnixMilli()
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(joined) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO room_places (voucher_id, user_id, place)
				SELECT $1, u, p FROM unnest($2::bigint[], $3::bigint[]) AS j(u, p)
				ON CONFLICT (voucher_id, user_id) DO NOTHING`, voucherID, users, places); err != nil {
				return err
			}
		}
		if len(admitted) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE room_places r SET pass_expires_ms = a.e
				FROM unnest($2::bigint[], $3::bigint[]) AS a(u, e)
				WHERE r.voucher_id = $1 AND r.user_id = a.u`, voucherID, admittedUsers, expiries); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: save room of voucher %d: %w", voucherID, err)
	}
	return nil
}

// RoomPlaces is the durable copy of voucherID's line, for waitroom.Room's
// Recover.
func (s *Store) RoomPlaces(ctx context.Context, voucherID int64) (_ []waitroom.Saved, err error) {
	defer unavailable(&err)
	rows, err := s.pool.Query(ctx, `SELECT user_id, place, pass_expires_ms FROM room_places WHERE voucher_id = $1`, voucherID)
	if err != nil {
		return nil, fmt.Errorf("pgstore: room of voucher %d: %w", voucherID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (waitroom.Saved, error) {
		var p waitroom.Saved
		var exp *int64
		if err := row.Scan(&p.UserID, &p.Score, &exp); err != nil {
			return p, err
		}
		if exp != nil {
			p.PassExpiresAt = time.UnixMilli(*exp)
		}
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: room of voucher %d: %w", voucherID, err)
	}
	return out, nil
}
