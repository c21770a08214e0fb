package waitroom

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/lua"
	"github.com/flashsale/seckill/seckill/apperr"
)

// Seated is what Seat found or did.
type Seated struct {
	// Now is true when this call seated the ranking; false when one was
	// seated before (by this or another instance).
	Now bool
	// Winners is how many of the seated ranking were admitted at once;
	// Size how many it seated. Both are the first seating's.
	Winners, Size int64
	// At is Redis's time of the call.
	At time.Time
	// Head is how many of the ranking were ever admitted (the winners and
	// the waitlisted who won since), and Closed whether the sale is over:
	// both as read by Room.Seated, not set by Seat.
	Head   int64
	Closed bool
}

// SeatSlice is how many places one call of queue_seat.lua writes: a
// slice of a large ranking keeps each Redis call to a few milliseconds.
const SeatSlice = 500

// Seat puts a draw's ranking in l's line, once: users in rank order, the
// first winners admitted at once with passes of l's PassTTL. It seats
// SeatSlice places a call; however many instances call it at once, each
// slice is written exactly once (a slice is written only where the seating
// stands), and a seating left halfway by an instance that died is finished
// by the next call. The call that writes the last slice answers Now; every
// later one answers what was seated, so the draw's result is fixed the
// moment it is seated. From then on the room is a line like any other: an
// unused pass expires into the next place, units back admit the next in
// rank order (queue_admit.lua), and Status tells each place.
func (r *Room) Seat(ctx context.Context, l Line, users []int64, winners int64) (Seated, error) {
	script := redis.NewScript(lua.QueueSeat)
	n := int64(len(users))
	for offset := int64(0); ; {
		end := min(offset+SeatSlice, n)
		args := make([]any, 0, end-offset+5)
		args = append(args, r.passTTLOf(l).Milliseconds(), winners, r.expireAt(l), offset, n)
		for _, u := range users[offset:end] {
			args = append(args, strconv.FormatInt(u, 10))
		}
		res, err := script.Run(ctx, r.rdb, r.keys(l.VoucherID), args...).Int64Slice()
		if err != nil {
			return Seated{}, unavailable("seat the draw", err)
		}
		if len(res) != 5 {
			return Seated{}, fmt.Errorf("waitroom: queue_seat.lua answered %v", res)
		}
		s := Seated{Now: res[0] == 1, Winners: res[1], Size: res[3], At: time.UnixMilli(res[2])}
		switch res[0] {
		case -1:
			return Seated{}, errLost(l.VoucherID)
		case 0:
			return s, nil
		case 1:
			if s.Winners > 0 {
				r.announceStep(ctx, l, Step{Head: s.Winners, At: s.At, Waiting: s.Size - s.Winners, Admitted: s.Winners})
				r.announceWins(ctx, l, users[:min(s.Winners, n)], s.At)
			}
			return s, nil
		}
		if res[3] != n || res[4] < 0 || res[4] > n {
			return Seated{}, fmt.Errorf("waitroom: voucher %d: a ranking of %d is being seated, not of %d", l.VoucherID, res[3], n)
		}
		offset = res[4]
	}
}

// Seated reports the ranking seated in voucherID's room: ok false before
// the draw.
func (r *Room) Seated(ctx context.Context, voucherID int64) (s Seated, ok bool, err error) {
	k := keysOf(voucherID)
	f, err := r.rdb.HMGet(ctx, k.room, "drawn", "head", "closed").Result()
	if err != nil {
		return Seated{}, false, fmt.Errorf("waitroom: read the draw: %w: %w", apperr.ErrUnavailable, err)
	}
	w, _ := f[0].(string)
	if w == "" {
		return Seated{}, false, nil
	}
	s.Winners, _ = strconv.ParseInt(w, 10, 64)
	h, _ := f[1].(string)
	s.Head, _ = strconv.ParseInt(h, 10, 64)
	c, _ := f[2].(string)
	s.Closed = c == "1"
	if s.Size, err = r.rdb.ZCard(ctx, k.line).Result(); err != nil {
		return Seated{}, false, unavailable("read the draw", err)
	}
	return s, true, nil
}

// announceWins publishes a TurnDrawWin for each winner. Their passes share
// the expiry the first slice fixed, read back from the first winner's.
func (r *Room) announceWins(ctx context.Context, l Line, winners []int64, at time.Time) {
	if len(winners) == 0 {
		return
	}
	exp, err := r.rdb.ZScore(ctx, keysOf(l.VoucherID).passes, strconv.FormatInt(winners[0], 10)).Result()
	until := at.Add(r.passTTLOf(l))
	if err == nil {
		until = time.UnixMilli(int64(exp))
	}
	r.announceTurns(ctx, l, TurnDrawWin, until, at, winners)
}
