package buy

import (
	"context"
	"errors"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
)

// Step names, as the steps' metrics label their refusals.
const (
	StepAddressLimit = "address_limit"
	StepUserLimit    = "user_limit"
	StepGlobalLimit  = "global_limit"
	StepCaptcha      = "captcha"
)

// Dependency paths of a buy, one breaker each (a Seller names its own).
const (
	// PathRedis is a seckill voucher's buy: reserve.lua in Redis, then the
	// Kafka write.
	PathRedis = "redis"
	// PathPostgreSQL is a limit or common voucher's buy: one PostgreSQL
	// transaction on the voucher's row.
	PathPostgreSQL = "postgresql"
)

// Steps are the pluggable steps of the buy (gateway/edge implements them).
// A nil step lets every attempt pass. Their order is the pipeline's, not
// the caller's (see Pipeline).
type Steps struct {
	// Address bounds the buying rate of one client address, by
	// Attempt.ClientKey, before any other limit (429).
	Address Limit
	// User bounds one shopper's buying rate, by the attempt's user (429).
	User Limit
	// Hoard refuses a shopper who let too many holds expire unpaid or
	// cancelled them recently (403 unpaid_limit; seckill/hoard.Store).
	Hoard Hoard
	// Global bounds the buying rate of all shoppers together (429).
	Global Limit
	// Fast refuses without I/O what the breaker or the sold-out flag
	// would refuse now, in front of each step that costs something.
	Fast Fast
	// Captcha judges CaptchaID/CaptchaAnswer when the voucher requires a
	// captcha (400 captcha_invalid).
	Captcha Captcha
	// Challenge judges ChallengeID/ChallengeAnswer when the voucher's
	// challenge is pow (400 challenge_invalid): the answer's hash without
	// I/O at step 1, the challenge itself, single use, at step 6.
	Challenge Challenge
	// Breaker fails fast while the seller's path is failing or ops shut
	// the door (503), and counts what it lets through.
	Breaker Breaker
	// SoldOut answers 409 sold_out, or a known replay, from memory once a
	// voucher is gone, and learns from every sale.
	SoldOut SoldOut
}

// Limit charges one attempt to a budget or refuses it (apperr.ErrRateLimited,
// with its Retry-After); it sets its RateLimit headers on the attempt.
type Limit interface {
	Take(ctx context.Context, a *Attempt) error
}

// Hoard judges a shopper by the holds they let expire unpaid or cancelled:
// seckill.ErrUnpaidLimit refuses them; any other error is the store's. It
// bounds its own I/O (seckill/hoard: hoard.CheckTimeout), so that a Redis
// link gone silent does not hold the buy until the request's deadline.
type Hoard interface {
	Check(ctx context.Context, userID int64) error
}

// Fast is the check without I/O made in front of each step that costs a
// Redis call or a shared budget: the breaker's refusal (503) and the
// sold-out flag's (409). step names the step it stands in front of, path
// the breaker the attempt runs behind.
type Fast interface {
	Refuse(step, path string, a *Attempt) error
}

// Captcha judges the attempt's captcha; known says the attempt's
// Idempotency-Key already made an order, whose captcha the first attempt
// burned.
type Captcha interface {
	Check(ctx context.Context, a *Attempt, known bool) error
}

// Challenge judges a proof of work. Precheck costs one hash and no I/O: an
// answer that is no solution at the lowest difficulty ever asked is
// refused before any budget is charged. Check spends the challenge (one
// Redis call) and judges it at the difficulty it was issued with; known
// is as for Captcha.
type Challenge interface {
	Precheck(a *Attempt) error
	Check(ctx context.Context, a *Attempt, known bool) error
}

// Breaker runs call behind the breaker of path, or refuses (503).
type Breaker interface {
	Run(ctx context.Context, path string, call func(ctx context.Context) (Purchase, error)) (Purchase, error)
}

// SoldOut is the sold-out flag.
type SoldOut interface {
	// Replay is the first order of a flagged voucher's known request key.
	Replay(a *Attempt) (orderID int64, ok bool)
	// Refuse says sold out from memory (409), or nil.
	Refuse(a *Attempt) error
	// Saw tells the flag what a seller answered.
	Saw(voucherID int64, s Sale, err error)
}

// Seller sells one kind of voucher. The pipeline picks it by the voucher's
// kind once, right after the catalog.
type Seller interface {
	// Sell makes the order, or refuses. A refusal may still say what the
	// stock had left (Sale.StockKnown).
	Sell(ctx context.Context, req seckill.BuyRequest) (Sale, error)
	// RequestKnown tells whether the shopper's Idempotency-Key already made
	// an order of the voucher.
	RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error)
	// Path is the breaker the seller runs behind (PathRedis, PathPostgreSQL).
	Path() string
}

// RequestKeys tells whether a shopper's Idempotency-Key already made an order
// of a voucher (redisstock's record for seckill vouchers, orders/pgstore for
// the others).
type RequestKeys interface {
	RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error)
}

// Reserver runs the asynchronous seckill purchase (seckill.Buyer).
type Reserver interface {
	Buy(ctx context.Context, req seckill.BuyRequest) (seckill.ReserveResult, error)
}

// OrderMaker sells the synchronous kinds (limit and common) in one database
// transaction and returns the created order, or the order the request's key
// made before with replayed set (orders.SyncBuyer).
type OrderMaker interface {
	Buy(ctx context.Context, req seckill.BuyRequest) (o orders.Order, replayed bool, err error)
}

// SeckillSeller sells seckill vouchers: a reservation in Redis, then Kafka.
type SeckillSeller struct {
	Buyer Reserver
	// Keys knows the requests the stock accepted; nil knows none.
	Keys RequestKeys
}

// Sell implements Seller. The stock's count is known after a new
// reservation and after a sold-out refusal, not after a replay.
func (s SeckillSeller) Sell(ctx context.Context, req seckill.BuyRequest) (Sale, error) {
	res, err := s.Buyer.Buy(ctx, req)
	sale := Sale{StockLeft: res.StockLeft, StockKnown: err == nil && !res.Replayed || errors.Is(err, seckill.ErrSoldOut)}
	if err != nil {
		return sale, err
	}
	sale.Purchase = Purchase{OrderID: res.OrderID, Status: orders.StatusReserved, Replayed: res.Replayed}
	return sale, nil
}

// RequestKnown implements Seller.
func (s SeckillSeller) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	if s.Keys == nil {
		return false, nil
	}
	return s.Keys.RequestKnown(ctx, voucherID, userID, key)
}

// Path implements Seller.
func (SeckillSeller) Path() string { return PathRedis }

// SyncSeller sells limit and common vouchers in PostgreSQL.
type SyncSeller struct {
	Buyer OrderMaker
	// Keys knows the orders' request keys; nil knows none.
	Keys RequestKeys
}

// Sell implements Seller.
func (s SyncSeller) Sell(ctx context.Context, req seckill.BuyRequest) (Sale, error) {
	o, replayed, err := s.Buyer.Buy(ctx, req)
	if err != nil {
		return Sale{}, err
	}
	return Sale{Purchase: Purchase{OrderID: o.ID, Status: o.Status, Replayed: replayed}}, nil
}

// RequestKnown implements Seller.
func (s SyncSeller) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	if s.Keys == nil {
		return false, nil
	}
	return s.Keys.RequestKnown(ctx, voucherID, userID, key)
}

// Path implements Seller.
func (SyncSeller) Path() string { return PathPostgreSQL }
