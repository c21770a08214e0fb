package remind

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/seckill/seckill/pause"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Ready is closed once the reminder hears the rooms' turns (Run
// subscribed to waitroom.Channel), or at once without Redis.
func (r *Reminder) Ready() <-chan struct{} { return r.ready }

// claimKey is the Redis key whose SET NX makes one gateway of the fleet
// remind a turn: every gateway hears every turn. This package owns it.
func claimKey(t Turn) string {
	return fmt.Sprintf("remind:turn:{v%d}:%d:%d", t.VoucherID, t.UserID, t.ValidUntil.UnixMilli())
}

// listen hears the rooms' turns until ctx ends, claiming each once for
// the fleet; a lost subscription is taken again after a second (turns
// published meanwhile are not replayed: the room keeps the place).
func (r *Reminder) listen(ctx context.Context) {
	first := true
	for ctx.Err() == nil {
		ps := r.cfg.Redis.Subscribe(ctx, waitroom.Channel)
		if _, err := ps.Receive(ctx); err != nil {
			_ = ps.Close()
			r.log.Warn("remind: cannot hear the rooms' turns", "err", err)
			_ = pause.For(ctx, time.Second)
			continue
		}
		if first {
			close(r.ready)
			first = false
		}
		for m := range ps.Channel() {
			t, ok := waitroom.ParseTurn(m.Payload)
			if !ok {
				continue
			}
			r.claim(ctx, t)
		}
		_ = ps.Close()
	}
	if first {
		close(r.ready)
	}
}

// claim queues t if this gateway is the first of the fleet to claim it.
func (r *Reminder) claim(ctx context.Context, t Turn) {
	ttl := time.Until(t.ValidUntil) + time.Minute
	if ttl < time.Minute {
		return // over already
	}
	won, err := r.cfg.Redis.SetNX(ctx, claimKey(t), 1, ttl).Result()
	if err != nil {
		r.log.Warn("remind: cannot claim a turn", "user_id", t.UserID, "voucher_id", t.VoucherID, "err", err)
		return
	}
	if won {
		r.TurnCame(ctx, t)
	}
}
