package waitroom

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/seckill/seckill/apperr"
)

// PassUnused reports whether userID holds an unused, unexpired pass of
// voucherID: their turn has come and they have not bought with it yet (a
// reminder of the turn is still worth sending).
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

// MissWouldHold reports whether userID's pass of voucherID, missed, would
// be held for the line's grace (README.md, "A missed turn is held"): only
// a first turn is, one with no outcome marked yet; a fresh pass after a
// hold, or a turn after that place went back in line once, is not.
func (r *Room) MissWouldHold(ctx context.Context, voucherID, userID int64) (bool, error) {
	marked, err := r.rdb.HExists(ctx, keysOf(voucherID).outcome, strconv.FormatInt(userID, 10)).Result()
	if err != nil {
		return false, fmt.Errorf("waitroom: read an outcome: %w: %w", apperr.ErrUnavailable, err)
	}
	return !marked, nil
}
