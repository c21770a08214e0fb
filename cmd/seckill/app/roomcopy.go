package app

// The waiting rooms' durable copy: the gateways mirror each room's journal
// to PostgreSQL, and the healer recovers a room Redis lost from it (see
// seckill/waitroom, Config.Recovery).

import (
	"context"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/pgstore"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// newRoom is the fleet's waiting rooms over this instance's Redis, kept
// through a Redis data loss: a room answers "being restored" while its
// voucher's stock is missing.
func (s *System) newRoom() *waitroom.Room {
	return waitroom.New(waitroom.Config{Redis: s.rdb, Secret: roomSecret(s.cfg.JWTSecret), Grace: s.cfg.StateGrace, PassTTL: s.cfg.RoomPassTTL,
		Recovery: redisstock.OnSaleKey})
}

// roomLines are the lines whose journal the mirror copies: every voucher of
// the catalog in memory with a waiting room, paused or not.
func (s *System) roomLines(ctx context.Context) ([]waitroom.Line, error) {
	snap, err := s.catalog.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var out []waitroom.Line
	for _, v := range snap.Vouchers() {
		if l, ok := waitroom.LineOf(v); ok {
			out = append(out, l)
		}
	}
	return out, nil
}

// roomRecovery recovers a room from its copy in PostgreSQL, for the healer.
type roomRecovery struct {
	room  *waitroom.Room
	store *pgstore.Store
}

var _ orders.RoomRecovery = roomRecovery{}

func (r roomRecovery) RecoverRoom(ctx context.Context, v seckill.Voucher, used []int64) error {
	l, ok := waitroom.LineOf(v)
	if !ok {
		return nil
	}
	saved, err := r.store.RoomPlaces(ctx, v.ID)
	if err != nil {
		return err
	}
	_, err = r.room.Recover(ctx, l, saved, used)
	return err
}
