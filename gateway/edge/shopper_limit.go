package edge

import (
	"context"
	"strconv"
	"time"
)

// shopperLimit bounds the signed-in routes other than the buy (a shopper's
// orders, one order, pay, cancel, the waiting room's join and read, the
// WebSocket's handshake with a token, which reads the shopper's orders): per
// user, then per client address, both in this instance's memory. Those
// routes cost PostgreSQL queries and Redis scripts, and nothing else bounded
// them; they need no exact fleet-wide budget (no stock rests on them), so
// they cost no round trip either. The user's own budget comes first: a
// request it refuses charges nothing that other shoppers behind the same
// address share.
type shopperLimit struct {
	user, addr *AddrLimit
}

// Allow implements gateway.ShopperLimiter. The RateLimit headers are the
// user's budget's, or the address's when that is what refused.
func (l *shopperLimit) Allow(_ context.Context, userID int64, clientKey string, set func(key, value string)) error {
	now := time.Now()
	res, err := l.user.charge(strconv.FormatInt(userID, 10), now)
	setRateHeaders(set, l.user.rate, res.remaining, res.resetAfter)
	if err != nil || clientKey == "" {
		return err // no address known (a test's direct call): nothing more to key on
	}
	if res, err = l.addr.charge(clientKey, now); err != nil {
		setRateHeaders(set, l.addr.rate, 0, res.resetAfter)
	}
	return err
}
