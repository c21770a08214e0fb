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
