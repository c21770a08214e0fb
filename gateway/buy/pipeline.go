// Package buy owns the buy: one Pipeline whose Buy runs every step of a
// purchase, top to bottom, in the order written in Pipeline's comment. It
// knows nothing of HTTP: the gateway decodes the request into an Attempt,
// calls Buy, and encodes what it returns (every refusal is an error
// wrapping a kind of seckill/apperr or a refusal of seckill, which the
// gateway's error table maps).
// gateway/edge implements the pluggable steps (Steps), and cmd/seckill
// builds the pipeline (New) and hands it to the gateway whole.
package buy

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// pausedRetryAfter is the Retry-After of 503 sale_paused: an operator's pause
// lasts a while, and an open page learns its end from the socket.
const pausedRetryAfter = 5 * time.Second

// knownTimeout bounds the look-up of a keyed attempt's earlier order on a
// captcha voucher; a look-up that fails counts as unknown.
const knownTimeout = time.Second

// Catalog is the vouchers, in memory (seckill.Catalog implements it).
type Catalog interface {
	// Voucher returns one voucher, or apperr.ErrNotFound.
	Voucher(ctx context.Context, id int64) (seckill.Voucher, error)
}

// OrderStatus reads one of a shopper's orders (orders.Reader implements it).
type OrderStatus interface {
	Get(ctx context.Context, userID, orderID int64) (orders.Order, error)
}

// Deps are what the pipeline runs on. Catalog and Seckill are required.
type Deps struct {
	Catalog Catalog
	Steps   Steps
	// Seckill sells seckill vouchers; Sync the other kinds (nil: Seckill
	// sells every kind).
	Seckill, Sync Seller
	// Room is the waiting rooms (pass.go). Nil: a voucher with a waiting
	// room is refused 503.
	Room Room
	// Replays answers a keyed waiting-room buy whose pass is refused with
	// the order its key made. Nil: such a buy is refused 403.
	Replays RequestOrders
	// Orders gives a replayed reservation its current status.
	Orders OrderStatus
	Logger *slog.Logger
}

// Pipeline is the buy. Buy runs, in this order (the README's purchase path
// and gateway/edge/README.md point here):
//
//  1. catalog: the voucher from memory; refused with no budget charged when
//     certainly useless (unknown 404, paused 503 with Retry-After, not yet
//     on sale 409; unkeyed, ended or a sold-out seckill voucher 409; on a
//     pow voucher, an answer whose hash is no solution even at the lowest
//     difficulty 400, one hash and no I/O). The voucher's kind picks its
//     Seller, once.
//  2. pass: a voucher with a waiting room takes a pass; its signature alone
//     refuses a missing, forged, someone else's or expired one (403), no I/O.
//  3. address limit: in memory (429).
//  4. user limit and strikes: fast refusal, then the user limit, the one
//     Redis call before the sale (429), then the shopper's unpaid strikes,
//     one Redis read of at most SECKILL_HOARD_LIMIT entries (403
//     unpaid_limit; a failed read lets the attempt on: the strikes are a
//     deterrent, not the stock's guard).
//  5. global limit: fast refusal, then this instance's share of the global
//     limit (429).
//  6. captcha: on vouchers that require a captcha or a proof of work, fast
//     refusal, then the captcha or the challenge, spent (400), unless the
//     seller knows the attempt's Idempotency-Key.
//  7. breaker: the seller's path's breaker runs 8 to 12 under its call
//     timeout and counts their outcome, or refuses (503).
//  8. sold-out flag: a known replay answered, or 409, from memory.
//  9. claim the pass: single use (a refused claim of a keyed attempt may
//     still replay its order).
//  10. the kind's seller: sells, or refuses.
//  11. the flag learns: the sold-out flag learns from the seller's answer.
//  12. settle the pass: given back when the failure is not the shopper's,
//     spent otherwise.
//  13. a replay's status: a replay answered with its order's current status.
//
// Each step is marked "// N. name" where it runs, with the number and name
// of this list, and the README's purchase path lists the same numbers and
// names, so a reader goes from either to the code; a test of the README
// (cmd/seckill/app/docs_test.go) keeps the three the same.
//
// The fast refusal is the breaker's and the sold-out flag's answer, asked
// without I/O in front of each step that costs a Redis call or a shared
// budget: an open breaker answers 503 without any Redis call (a dead Redis
// would otherwise make the user limit wait on it), and a sold-out voucher
// costs a map look-up, not a rate-limit script, and takes nothing from the
// global limit. It is asked again at 5 and 6 because the user limit's round
// trip may have seen the breaker open or the voucher sell out.
//
// The limits go from the narrowest budget to the widest, so that what one
// client sends is refused by its own budget before it can charge a shared
// one: a request refused by its address's limit charges neither the user's
// nor the global one, and one refused by the user's limit never charges the
// global one. An account flooding the buy button spends its own few
// requests a second and nothing other shoppers need, and an address sending
// for many accounts spends its address's budget. No budget is given back
// when a later step refuses. The address limit comes first also because it
// costs no I/O, so a flood from one address never reaches Redis.
type Pipeline struct {
	catalog Catalog
	steps   Steps
	seckill Seller
	sync    Seller
	room    Room
	replays RequestOrders
	orders  OrderStatus
	outcome func(error)
	sold    func(path string, took time.Duration, err error)
	// tracer, when set, makes the buy's spans (trace.go).
	tracer trace.Tracer
	log    *slog.Logger
	now    func() time.Time
}

// New builds the pipeline.
func New(d Deps) (*Pipeline, error) {
	if d.Catalog == nil || d.Seckill == nil {
		return nil, errors.New("buy: the catalog and the seckill seller are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	sync := d.Sync
	if sync == nil {
		sync = d.Seckill
	}
	return &Pipeline{
		catalog: d.Catalog, steps: d.Steps, seckill: d.Seckill, sync: sync, room: d.Room,
		replays: d.Replays, orders: d.Orders, log: d.Logger, now: time.Now,
	}, nil
}

// WithOutcome returns a copy of p that tells outcome every attempt's answer
// once, before the status of a replay is read: the caller that counts the
// answers (the gateway's metrics) is not the one that builds the pipeline.
func (p *Pipeline) WithOutcome(outcome func(err error)) *Pipeline {
	c := *p
	c.outcome = outcome
	return &c
}

// WithSale returns a copy of p that tells sold how long each call of a
// seller took (step 10) and what it answered: the one measure of the back
// end that a crowd's cheap refusals cannot move, since only an attempt that
// passed every limit, the captcha, the breaker and the sold-out flag
// reaches it. The waiting rooms' adaptive rate is judged by it
// (seckill/waitroom/README.md).
func (p *Pipeline) WithSale(sold func(path string, took time.Duration, err error)) *Pipeline {
	c := *p
	c.sold = sold
	return &c
}

// Buy runs the attempt through every step (see Pipeline). The headers the
// steps set are on a.Header, whatever the answer.
func (p *Pipeline) Buy(ctx context.Context, a *Attempt) (Purchase, error) {
	ctx, span := p.startBuy(ctx, a)
	pur, err := p.buy(ctx, a)
	endBuy(span, pur, err)
	return pur, err
}

// buy is Buy without its span.
func (p *Pipeline) buy(ctx context.Context, a *Attempt) (Purchase, error) {
	pur, err := p.run(ctx, a)
	if p.outcome != nil {
		p.outcome(err)
	}
	if err != nil {
		return Purchase{}, err
	}
	// 13. a replay's status
	return p.replayStatus(ctx, a.Request.UserID, pur)
}

// run is steps 1 to 12.
func (p *Pipeline) run(ctx context.Context, a *Attempt) (Purchase, error) {
	// 1. catalog
	if err := p.fromCatalog(ctx, a); err != nil {
		return Purchase{}, err
	}
	seller := p.sellerOf(a.Voucher.Kind)
	// 2. pass
	if err := p.checkPass(a); err != nil {
		return Purchase{}, err
	}
	// 3. address limit
	if l := p.steps.Address; l != nil {
		if err := l.Take(ctx, a); err != nil {
			return Purchase{}, refusedBy(StepAddressLimit, a, err)
		}
	}
	// 4. user limit and strikes
	if err := p.limit(ctx, StepUserLimit, p.steps.User, seller, a); err != nil {
		return Purchase{}, err
	}
	if err := p.strikes(ctx, a); err != nil {
		return Purchase{}, err
	}
	// 5. global limit
	if err := p.limit(ctx, StepGlobalLimit, p.steps.Global, seller, a); err != nil {
		return Purchase{}, err
	}
	// 6. captcha
	if err := p.captcha(ctx, seller, a); err != nil {
		return Purchase{}, err
	}
	sell := func(ctx context.Context) (Purchase, error) { return p.sell(ctx, seller, a) }
	if p.steps.Breaker == nil {
		return sell(ctx)
	}
	// 7. breaker
	return p.steps.Breaker.Run(ctx, seller.Path(), sell)
}

// sell is steps 8 to 12, behind the breaker.
func (p *Pipeline) sell(ctx context.Context, seller Seller, a *Attempt) (Purchase, error) {
	// 8. sold-out flag
	if so := p.steps.SoldOut; so != nil {
		if id, ok := so.Replay(a); ok {
			return Purchase{OrderID: id, Status: orders.StatusReserved, Replayed: true}, nil
		}
		if err := so.Refuse(a); err != nil {
			return Purchase{}, err
		}
	}
	// 9. claim the pass
	claimed, done, pur, err := p.claimPass(ctx, a)
	if done {
		return pur, err
	}
	// 10. the kind's seller
	start := time.Now()
	sale, err := seller.Sell(ctx, a.Request)
	// The seckill reservation judges the user limit itself when it holds
	// it (gateway/edge, Config.UserLimitInStock): its refusal is step 4's.
	err = refusedBy(StepUserLimit, a, err)
	if p.sold != nil {
		p.sold(seller.Path(), time.Since(start), err)
	}
	// 11. the flag learns
	if so := p.steps.SoldOut; so != nil {
		so.Saw(a.Request.VoucherID, sale, err)
	}
	// 12. settle the pass
	p.settlePass(ctx, a, claimed, err)
	if err != nil {
		return Purchase{}, err
	}
	return sale.Purchase, nil
}

// fromCatalog is step 1: it loads the voucher into the attempt and refuses,
// without charging any budget, what is certainly useless (see
// seckill.CertainRefusal for what stays the reservation's to judge).
func (p *Pipeline) fromCatalog(ctx context.Context, a *Attempt) error {
	v, err := p.catalog.Voucher(ctx, a.Request.VoucherID)
	if err != nil {
		return err
	}
	// Set before the refusals too: the sale report counts an attempt
	// refused here against its (known) voucher.
	a.Voucher = v
	if err := seckill.CertainRefusal(v, p.now(), a.Request.RequestKey != ""); err != nil {
		if v.Paused {
			err = apperr.WithRetryAfter(err, pausedRetryAfter)
		}
		return err
	}
	a.Request.EndsAt = v.EndAt
	if v.ProofOfWork && p.steps.Challenge != nil {
		return p.steps.Challenge.Precheck(a)
	}
	return nil
}

// sellerOf is the one place the kind of a voucher picks how it is sold.
func (p *Pipeline) sellerOf(k seckill.Kind) Seller {
	if k == seckill.KindSeckill {
		return p.seckill
	}
	return p.sync
}

// fast is the fast refusal in front of step.
func (p *Pipeline) fast(step string, seller Seller, a *Attempt) error {
	if p.steps.Fast == nil {
		return nil
	}
	return p.steps.Fast.Refuse(step, seller.Path(), a)
}

// limit is a fast refusal, then the limit l (steps 4 and 5).
func (p *Pipeline) limit(ctx context.Context, step string, l Limit, seller Seller, a *Attempt) error {
	if l == nil {
		return nil
	}
	if err := p.fast(step, seller, a); err != nil {
		return err
	}
	return refusedBy(step, a, l.Take(ctx, a))
}

// refusedBy names step as a's Limiter when err is its limit's refusal, and
// returns err.
func refusedBy(step string, a *Attempt, err error) error {
	if errors.Is(err, apperr.ErrRateLimited) {
		a.Limiter = step
	}
	return err
}

// strikes is the end of step 4: a shopper over the unpaid limit is
// refused. It comes after the user limit, so a refused hoarder's flood is
// cut by their own budget before it costs this read, and before the global
// limit, so it takes nothing from the shared one.
func (p *Pipeline) strikes(ctx context.Context, a *Attempt) error {
	if p.steps.Hoard == nil {
		return nil
	}
	// The read of Redis, when there is one, is bounded by the Hoard
	// (hoard.CheckTimeout): most shoppers are judged from memory.
	err := p.steps.Hoard.Check(ctx, a.Request.UserID)
	if err == nil || errors.Is(err, seckill.ErrUnpaidLimit) {
		return err
	}
	p.log.WarnContext(ctx, "unpaid strikes not read; the buy goes on", "user_id", a.Request.UserID, "err", err)
	return nil
}

// captcha is step 6.
func (p *Pipeline) captcha(ctx context.Context, seller Seller, a *Attempt) error {
	var check func(context.Context, *Attempt, bool) error
	switch {
	case a.Voucher.CaptchaRequired && p.steps.Captcha != nil:
		check = p.steps.Captcha.Check
	case a.Voucher.ProofOfWork && p.steps.Challenge != nil:
		check = p.steps.Challenge.Check
	default:
		return nil
	}
	if err := p.fast(StepCaptcha, seller, a); err != nil {
		return err
	}
	return check(ctx, a, p.requestKnown(ctx, seller, a))
}

// Captcha is step 6 alone, for joining a waiting room: the attempt carries
// the voucher and the captcha, and no Idempotency-Key.
func (p *Pipeline) Captcha(ctx context.Context, a *Attempt) error {
	return p.captcha(ctx, p.sellerOf(a.Voucher.Kind), a)
}

// HasCaptcha reports whether the pipeline judges captchas.
func (p *Pipeline) HasCaptcha() bool { return p.steps.Captcha != nil }

// requestKnown reports whether the attempt's Idempotency-Key already made an
// order of the voucher: a retry, whose captcha the first attempt burned, and
// which the seller (or the sold-out flag) replays without selling anything.
// Only keyed attempts on captcha vouchers pay this look-up; a failure counts
// as unknown, and the captcha then answers for itself.
func (p *Pipeline) requestKnown(ctx context.Context, seller Seller, a *Attempt) bool {
	if a.Request.RequestKey == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, knownTimeout)
	defer cancel()
	known, err := seller.RequestKnown(ctx, a.Request.VoucherID, a.Request.UserID, a.Request.RequestKey)
	return err == nil && known
}

// replayStatus is the current status of a replayed attempt's order: the
// reservation replayed only knows it was reserved once. A synchronous kind's
// replay already carries its order's status from PostgreSQL. An order that
// neither PostgreSQL nor a live hold knows was released without a record:
// it can never become one, which is failed.
func (p *Pipeline) replayStatus(ctx context.Context, userID int64, pur Purchase) (Purchase, error) {
	if !pur.Replayed || pur.Status != orders.StatusReserved || p.orders == nil {
		return pur, nil
	}
	o, err := p.orders.Get(ctx, userID, pur.OrderID)
	switch {
	case errors.Is(err, apperr.ErrNotFound):
		pur.Status = orders.StatusFailed
		return pur, nil
	case err != nil:
		return Purchase{}, err
	}
	pur.Status = o.Status
	return pur, nil
}
