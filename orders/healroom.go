package orders

import (
	"context"
	"fmt"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/redisstock"
)

// RoomRecovery puts back a voucher's waiting room after Redis lost it, from
// its durable copy (seckill/waitroom, Recover). used are the users with an
// order of the voucher: each used their pass once. It writes nothing for a
// room Redis still holds.
type RoomRecovery interface {
	RecoverRoom(ctx context.Context, v seckill.Voucher, used []int64) error
}

// WithRoomRecovery is stock seen by Repair with the voucher's waiting room
// recovered by room just before the stock goes back on sale (see
// roomFirst): the healer's repairs and the operator's.
func WithRoomRecovery(stock Stock, room RoomRecovery) Stock {
	return roomFirst{Stock: stock, room: room}
}

// roomFirst is a repair's stock that recovers the voucher's waiting
// room just before the stock goes back on sale: the room's scripts answer
// "being restored" while the stock is missing, so nobody joins, is admitted
// or spends a pass in a room about to be replaced, and every order the heal
// waited for (Repair drains the messages in flight first) is in PostgreSQL,
// so a pass that bought is never honoured again.
type roomFirst struct {
	Stock
	room RoomRecovery
}

func (r roomFirst) Rebuild(ctx context.Context, t redisstock.Truth) error {
	if v := t.Voucher; v.WaitingRoom != nil {
		seen := map[int64]bool{}
		var used []int64
		for _, list := range [][]seckill.Reservation{t.Holds, t.Released} {
			for _, o := range list {
				if !seen[o.UserID] {
					seen[o.UserID] = true
					used = append(used, o.UserID)
				}
			}
		}
		if err := r.room.RecoverRoom(ctx, v, used); err != nil {
			return fmt.Errorf("orders: heal: waiting room of voucher %d: %w", v.ID, err)
		}
	}
	return r.Stock.Rebuild(ctx, t)
}

// fenced is a healer's repair stock: its Rebuild commits only while the heal
// lease of token still holds, so a healer that lost its lease writes nothing.
type fenced struct {
	Stock
	token string
}

func (f fenced) Rebuild(ctx context.Context, t redisstock.Truth) error {
	t.Fence = f.token
	return f.Stock.Rebuild(ctx, t)
}
