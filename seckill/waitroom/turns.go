package waitroom

// Turns: who was just admitted. The feeds tell the shoppers whose sockets
// are open (feed.go); a shopper whose tab is closed learns of the turn only
// if someone tells them another way (notify/remind). The step's announcement
// carries ranks, not users, so the instance whose step admitted them reads
// the users of those ranks once, here, and hands them to Config.Turns.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Turn is a shopper's turn to buy: admitted to the voucher's sale (a line's
// pass, a draw's win, a returned unit) with a pass valid until Until.
type Turn struct {
	VoucherID int64
	UserID    int64
	Until     time.Time
}

// TurnSink hears every turn the rooms of this instance give. Exactly one
// instance of the fleet hears each turn: the one whose step admitted it.
// TurnCame must not block: it is called on the admission step's path.
type TurnSink interface {
	TurnCame(ctx context.Context, t Turn)
}

// tellTurns hands the turns of step s of l (ranks Head-Admitted..Head-1 of
// the line) to the sink. Best effort: a failed read is a turn nobody is
// reminded of, never a failed step.
func (r *Room) tellTurns(ctx context.Context, l Line, s Step) {
	if r.turns == nil || s.Admitted <= 0 {
		return
	}
	users, err := r.rdb.ZRange(ctx, keysOf(l.VoucherID).line, s.Head-s.Admitted, s.Head-1).Result()
	if err != nil {
		return
	}
	until := s.At.Add(r.passTTLOf(l))
	for _, u := range users {
		id, err := strconv.ParseInt(u, 10, 64)
		if err != nil {
			continue
		}
		r.turns.TurnCame(ctx, Turn{VoucherID: l.VoucherID, UserID: id, Until: until})
	}
}

// PassUnused reports whether userID holds an unused, unexpired pass of
// voucherID: their turn has come and they have not bought with it yet.
func (r *Room) PassUnused(ctx context.Context, voucherID, userID int64) (bool, error) {
	exp, err := r.rdb.ZScore(ctx, keysOf(voucherID).passes, strconv.FormatInt(userID, 10)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("waitroom: read a pass: %w: %w", apperr.ErrUnavailable, err)
	}
	return int64(exp) > r.now().UnixMilli(), nil
}
