package waitroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/apperr"
)

// A room survives a Redis data loss (see README.md, "The waiting room"):
//
//   - Every new place and every admission is also appended to the room's
//     journal in Redis, in the same script. A Mirror copies the journal to
//     PostgreSQL in batches (one write per room per interval, never one per
//     join), so what a loss can take is at most the last interval's joins
//     and admissions.
//   - While the voucher's stock meta is missing from Redis (the stock was
//     lost with the room: the same slot, the same node) the room's scripts
//     answer lost, which callers see as apperr.ErrUnavailable (503, try
//     again): nobody joins a line that is about to be put back, and no pass
//     is refused for want of a record.
//   - The healer, before it puts the stock back, calls Recover with the copy
//     and the users who have an order of the voucher (a pass is used once;
//     an order is what used it). Passes are signed, so an unexpired pass is
//     honoured again as soon as its holder's admission is back.

// keys is the KEYS of the room's scripts for voucherID: with recovery, the
// journal and the stock meta follow the five keys of the room.
func (r *Room) keys(voucherID int64) []string {
	k := keysOf(voucherID)
	if r.onSale == nil {
		return k.list()
	}
	return append(k.list(), k.journal, r.onSale(voucherID))
}

// errLost is the answer of a room whose Redis state is being restored.
func errLost(voucherID int64) error {
	return &apperr.PublicError{Kind: apperr.ErrUnavailable,
		Message: "the waiting room is being restored after a Redis failure; try again in a few seconds, your place is kept",
		Cause:   fmt.Errorf("waitroom: voucher %d: the room's Redis state is missing until the healer restores it", voucherID)}
}

// Saved is one shopper's place as the durable copy keeps it.
type Saved struct {
	UserID int64
	// Score is the place (see the package's data model).
	Score int64
	// PassExpiresAt is the expiry of the pass the shopper was admitted
	// with; zero while waiting.
	PassExpiresAt time.Time
}

// Recover puts back l's room from saved (its durable copy) after Redis lost
// it: the line in the same order, the admitted with their passes (used by
// the users in used, expired past their expiry), the arrival sequence and
// the admission clock from now. It writes nothing when the line is in Redis
// (the room was not lost: a heal for drift leaves it alone) and answers
// whether it wrote.
func (r *Room) Recover(ctx context.Context, l Line, saved []Saved, used []int64) (bool, error) {
	if len(saved) == 0 {
		return false, nil
	}
	k := keysOf(l.VoucherID)
	isUsed := make(map[int64]bool, len(used))
	for _, u := range used {
		isUsed[u] = true
	}
	wrote := false
	err := r.rdb.Watch(ctx, func(tx *redis.Tx) error {
		n, err := tx.Exists(ctx, k.line).Result()
		if err != nil || n > 0 {
			return err
		}
		now, err := tx.Time(ctx).Result()
		if err != nil {
			return err
		}
		var line, passes []redis.Z
		var outcome []any
		var head, seq, expired, nUsed int64
		for _, s := range saved {
			line = append(line, redis.Z{Score: float64(s.Score), Member: s.UserID})
			if s.Score >= prequeueEnd {
				seq = max(seq, s.Score-prequeueEnd)
			}
			if s.PassExpiresAt.IsZero() {
				continue
			}
			head++
			switch {
			case isUsed[s.UserID]:
				outcome = append(outcome, s.UserID, "u")
				nUsed++
			case !now.Before(s.PassExpiresAt):
				outcome = append(outcome, s.UserID, "x")
				expired++
			default:
				passes = append(passes, redis.Z{Score: float64(s.PassExpiresAt.UnixMilli()), Member: s.UserID})
			}
		}
		expire := r.expireAt(l)
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i := 0; i < len(line); i += restoreChunk {
				p.ZAdd(ctx, k.line, line[i:min(i+restoreChunk, len(line))]...)
			}
			for i := 0; i < len(passes); i += restoreChunk {
				p.ZAdd(ctx, k.passes, passes[i:min(i+restoreChunk, len(passes))]...)
			}
			for i := 0; i < len(outcome); i += 2 * restoreChunk {
				p.HSet(ctx, k.outcome, outcome[i:min(i+2*restoreChunk, len(outcome))]...)
			}
			p.HSet(ctx, k.room, "head", head, "seq", seq, "expired", expired, "used", nUsed,
				"t", strconv.FormatInt(now.UnixMilli(), 10))
			for _, key := range k.list() {
				p.Do(ctx, "PEXPIREAT", key, expire)
			}
			return nil
		})
		wrote = err == nil
		return err
	}, k.line)
	if errors.Is(err, redis.TxFailedErr) {
		return false, nil // someone wrote the line meanwhile: the room is live again
	}
	if err != nil {
		return false, unavailable("restore room", err)
	}
	return wrote, nil
}

// prequeueEnd is 2^52: places from BeginAt on are prequeueEnd plus the
// arrival sequence (queue_join.lua).
const prequeueEnd = int64(1) << 52

// restoreChunk bounds the members of one command of Recover.
const restoreChunk = 1000
