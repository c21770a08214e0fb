package waitroom

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"
)

// TurnKind is how a shopper's turn came (Turn.Kind).
type TurnKind string

// The kinds of turn.
const (
	// TurnPass: the line admitted the shopper.
	TurnPass TurnKind = "pass"
	// TurnDrawWin: the draw was made and the shopper won.
	TurnDrawWin TurnKind = "draw_win"
	// TurnReturnedUnit: a unit came back (a hold timed out, a cancel,
	// stock added, a winner's pass missed) and went to the shopper, the
	// next in line or on the draw's waitlist.
	TurnReturnedUnit TurnKind = "returned_unit"
	// TurnHeldPass: the shopper missed a turn, came back within the grace
	// and got a fresh pass.
	TurnHeldPass TurnKind = "held_pass"
)

// Turn says that a shopper's turn came: UserID may buy VoucherID with the
// pass the room gave them until ValidUntil (the pass's expiry; a missed
// pass is then held for the line's grace, see the README). Every turn is
// published once, on Channel, by the instance whose script gave the pass,
// as the JSON
//
//	{"t":"t","v":42,"u":7,"w":"pass","x":1767225600000,"a":1767225480000,...}
//
// t is "t" (a turn), v the voucher id, u the user id, w the TurnKind, x the
// pass's expiry and a Redis's time when the turn came, both Unix
// milliseconds; the line's fields (b, e, r, p, d) ride along as in every
// message of Channel. A reminder (Web Push, e-mail) subscribes to Channel
// and reads each payload with ParseTurn; every gateway hears every turn,
// so a sender that runs on each of them sends once per (v, u, x), e.g.
// behind a SET NX of that key. Pub/sub is best effort: a turn published
// while nobody listens is not replayed; the place itself is in the room
// (GET /api/v1/vouchers/{id}/queue).
type Turn struct {
	VoucherID  int64
	UserID     int64
	Kind       TurnKind
	ValidUntil time.Time
	At         time.Time
}

// ParseTurn reads a message of Channel; ok is false for anything but a turn.
func ParseTurn(payload string) (t Turn, ok bool) {
	var m wire
	if err := json.Unmarshal([]byte(payload), &m); err != nil || m.T != "t" || m.V <= 0 || m.U == 0 {
		return Turn{}, false
	}
	return Turn{VoucherID: m.V, UserID: m.U, Kind: TurnKind(m.W), ValidUntil: time.UnixMilli(m.X), At: time.UnixMilli(m.A)}, true
}

// announceTurns publishes a Turn of kind for each of users, whose passes
// expire at until; at is Redis's time when the turns came. Best effort, as
// every message of Channel.
//
// One step may admit a thousand: the messages go in one pipeline, one
// round trip, not one each.
func (r *Room) announceTurns(ctx context.Context, l Line, kind TurnKind, until, at time.Time, users []int64) {
	_, _ = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, u := range users {
			m := wire{T: "t", A: at.UnixMilli(), U: u, W: string(kind), X: until.UnixMilli()}
			m.setLine(l)
			if b, err := json.Marshal(&m); err == nil {
				p.Publish(ctx, Channel, b)
			}
		}
		return nil
	})
}
