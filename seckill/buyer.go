package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/pause"
)

// BuyRequest is one shopper's attempt to buy a seckill voucher.
type BuyRequest struct {
	VoucherID  int64
	UserID     int64
	Quantity   int64
	RequestKey string // the Idempotency-Key, or "" for a fresh attempt
	// EndsAt is the end of the voucher's sale as the caller's copy of the
	// voucher says (zero when unknown). It is read only when the fast store
	// has no state for the voucher, to tell a sale whose keys expired after
	// it ended (ErrEnded) from one that is being restored (apperr.ErrUnavailable).
	EndsAt time.Time
}

// Validate checks the parts a shopper controls, with the same rules as
// Reservation.Validate. A missing user is a failed login, not bad input.
func (r BuyRequest) Validate() error {
	if r.UserID <= 0 {
		return apperr.Public(apperr.ErrUnauthenticated, "bad user id")
	}
	return Reservation{VoucherID: r.VoucherID, UserID: r.UserID, Quantity: r.Quantity, RequestKey: r.RequestKey}.validateRequest()
}

// Buyer runs the asynchronous purchase: reserve in the stock, then hand the
// reservation to the queue; if the queue cannot take it, give the stock back.
type Buyer struct {
	stock  Stock
	queue  Queue
	ids    OrderIDs
	log    *slog.Logger
	now    func() time.Time
	heals  HealRequests
	keyed  KeyedOrders
	fences OrderFences
	// replayWait bounds the wait of a replay for its first order's fate
	// (BuyerConfig.ReplayWait).
	replayWait time.Duration

	// settling holds the request keys whose first attempt this Buyer is
	// still deciding: a second call with the same key waits for it, so it
	// replays a write that landed or, after a fence, starts anew, and never
	// answers 202 with an order that the first attempt then fences. A call
	// on another Buyer (another gateway) finds the hold undecided in the
	// stock instead (reserve), and waits there.
	settling KeyTurns[keyedAttempt]
}

// keyedAttempt names the attempts that one Idempotency-Key covers.
type keyedAttempt struct {
	voucherID, userID int64
	key               string
}

// HealRequests asks the fleet's healers to restore a voucher whose state the
// fast store lost (seckill/redisstock implements it). It must be cheap and
// must not block the buy: it is called on the buying path.
type HealRequests interface {
	RequestHeal(ctx context.Context, voucherID int64)
}

// KeyedOrders finds the order a request key gave, in the record
// (orders/pgstore implements it). It answers replays the fast store can no
// longer answer: after a sale's keys expired, or while they are rebuilt.
type KeyedOrders interface {
	OrderIDByRequestKey(ctx context.Context, userID, voucherID int64, key string) (int64, bool, error)
}

// OrderFences settles at once the outcome of a reservation whose queue write
// failed unclearly, the way the reconciler's release does (orders/pgstore
// implements it): by writing the order's terminal record first.
type OrderFences interface {
	// FenceOrder stores r as a failed order with its release owed, unless an
	// order with its id exists. fenced is true when this call stored it:
	// from then on no copy of r's message can become a live order (a
	// worker's insert finds the failed row). The row does not take r's
	// request key, so a retry of the key is a new attempt. false means a
	// worker persisted the order first.
	FenceOrder(ctx context.Context, r Reservation) (fenced bool, err error)
	// ClearReleasePending records that these orders' stock is back in the
	// fast store (until then the sweepers' release loop retries it).
	ClearReleasePending(ctx context.Context, orderIDs []int64) error
}

// BuyerConfig is what NewBuyer builds a Buyer from.
type BuyerConfig struct {
	// Stock reserves and gives back.
	Stock Stock
	// Queue takes the reservations to the workers.
	Queue Queue
	// IDs gives the order ids.
	IDs OrderIDs
	// Log; slog.Default() when nil.
	Log *slog.Logger
	// HealRequests, when set, is asked to restore a voucher the fast store
	// has no state for.
	HealRequests HealRequests
	// KeyedOrders, when set, answers a replayed request key from the record
	// when the fast store has no state for the voucher.
	KeyedOrders KeyedOrders
	// OrderFences, when set, settles an unclear queue write at once: the
	// order is fenced as failed and its stock given back, or found
	// persisted. Without it the hold is kept for the workers or the
	// reconciler.
	OrderFences OrderFences
	// ReplayWait bounds how long a replay of an Idempotency-Key whose first
	// order is not decided yet (ErrUndecided) waits for the decision before
	// it is refused 503 with a Retry-After (DefaultReplayWait when zero).
	ReplayWait time.Duration
}

// DefaultReplayWait is BuyerConfig.ReplayWait's default. A hold is decided
// within a Kafka write, milliseconds, when the brokers are well; an unclear
// write takes the breaker's call timeout (3 s) and a fence. A shopper is
// better told to retry in two seconds than held that long.
const DefaultReplayWait = 2 * time.Second

// replayPoll is the first pause of a replay waiting for its first order's
// fate, doubled up to maxReplayPoll: a decision is usually a Kafka write
// away, and a long one should not cost Redis a script every few ms.
const (
	replayPoll    = 5 * time.Millisecond
	maxReplayPoll = 100 * time.Millisecond
)

// promiseWait bounds the promise of a written reservation, past the buy's own
// deadline too: the message is written, so the promise is worth its round
// trip even when the buyer is about to give up.
const promiseWait = 500 * time.Millisecond

// QueueRetryAfter is the Retry-After of a buy refused because the queue could
// not take its order: the brokers' own recovery (a leader election, a node
// back) takes seconds.
const QueueRetryAfter = 2 * time.Second

// RestoreRetryAfter is the Retry-After of a buy refused while a voucher's
// fast-store state is being restored: a heal takes seconds, not minutes.
const RestoreRetryAfter = 2 * time.Second

// NewBuyer returns a Buyer.
func NewBuyer(cfg BuyerConfig) *Buyer {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.ReplayWait <= 0 {
		cfg.ReplayWait = DefaultReplayWait
	}
	return &Buyer{stock: cfg.Stock, queue: cfg.Queue, ids: cfg.IDs, log: cfg.Log, now: time.Now,
		heals: cfg.HealRequests, keyed: cfg.KeyedOrders, fences: cfg.OrderFences, replayWait: cfg.ReplayWait}
}

// serialize waits until no other call of this Buyer is deciding an attempt
// with req's request key, then claims it; done hands it on. Calls without a
// key are not serialized: nothing can replay them.
func (b *Buyer) serialize(ctx context.Context, req BuyRequest) (done func(), err error) {
	if req.RequestKey == "" {
		return func() {}, nil
	}
	return b.settling.Take(ctx, keyedAttempt{req.VoucherID, req.UserID, req.RequestKey})
}

// retryLaterError is a buy refused for a while: 503 with a Retry-After and
// a sentence a shopper can act on.
type retryLaterError struct {
	err     error
	after   time.Duration
	message string
}

func (e *retryLaterError) Error() string { return e.err.Error() }
func (e *retryLaterError) Unwrap() error { return e.err }

// RetryAfter is read by the gateway for the Retry-After header.
func (e *retryLaterError) RetryAfter() time.Duration { return e.after }

// PublicMessage is what the shopper reads.
func (e *retryLaterError) PublicMessage() string { return e.message }

// restoring is the refusal of a buy while the voucher's fast-store state is
// missing.
func restoring(err error) error {
	return &retryLaterError{err: err, after: RestoreRetryAfter,
		message: "this sale is being restored after a fault; please try again in a few seconds"}
}

// undecidedReplay is the refusal of a replay whose first order was still
// undecided when its wait ended: this call bought nothing, and that order
// may still stand, so it is also ErrOutcomeUnknown (the attempt keeps what
// it spent, and a retry of the key gets the order, or holds anew).
func undecidedReplay(err error) error {
	return &retryLaterError{err: fmt.Errorf("%w: %w: %w", apperr.ErrUnavailable, ErrOutcomeUnknown, err), after: QueueRetryAfter,
		message: "your earlier attempt with this Idempotency-Key is still being recorded; please try again in a few seconds with the same key"}
}

// queueRefused is the refusal of a buy whose order certainly does not exist:
// the queue refused it, or it was fenced; its stock is back (or owed by a
// durable record).
func queueRefused(err error) error {
	return &retryLaterError{err: err, after: QueueRetryAfter,
		message: "nothing was bought: we could not record the order just now; please try again in a few seconds"}
}

// stockMissing answers a buy whose reservation found no state for the
// voucher in the fast store. The caller knows the voucher exists (the
// gateway looked it up), so this is never "not found": a replayed key is
// answered from the record, a sale past its end is ended, and anything else
// is told to come back while the healers restore the voucher.
func (b *Buyer) stockMissing(ctx context.Context, req BuyRequest, err error) (ReserveResult, error) {
	if req.RequestKey != "" && b.keyed != nil {
		id, found, kerr := b.keyed.OrderIDByRequestKey(ctx, req.UserID, req.VoucherID, req.RequestKey)
		if kerr == nil && found {
			return ReserveResult{OrderID: id, Replayed: true}, nil
		}
	}
	if !req.EndsAt.IsZero() && !b.now().Before(req.EndsAt) {
		return ReserveResult{}, fmt.Errorf("%w: voucher %d (its sale state has expired)", ErrEnded, req.VoucherID)
	}
	if b.heals != nil {
		b.heals.RequestHeal(ctx, req.VoucherID)
	}
	return ReserveResult{}, restoring(err)
}

// Buy reserves and enqueues. On success the reservation is on its way to the
// workers; a replayed request key returns the first reservation's order id
// without holding anything again. A refusal of the stock still carries its
// StockLeft.
func (b *Buyer) Buy(ctx context.Context, req BuyRequest) (ReserveResult, error) {
	if err := req.Validate(); err != nil {
		return ReserveResult{}, err
	}
	done, err := b.serialize(ctx, req)
	if err != nil {
		return ReserveResult{}, err
	}
	defer done()
	r := Reservation{
		OrderID:    b.ids.Next(),
		VoucherID:  req.VoucherID,
		UserID:     req.UserID,
		Quantity:   req.Quantity,
		RequestKey: req.RequestKey,
		ReservedAt: b.now().UTC(),
	}
	res, err := b.reserve(ctx, r)
	if errors.Is(err, ErrStockMissing) {
		return b.stockMissing(ctx, req, err)
	}
	if err != nil {
		// A refusal keeps the stock's count: a sold-out answer says
		// whether none is left or too few (the gateway's sold-out flag).
		return ReserveResult{StockLeft: res.StockLeft}, err
	}
	if res.Replayed {
		return res, nil
	}
	if err := b.queue.Publish(ctx, r); err != nil {
		// A context that is already done must not stop what follows: the
		// outcome is settled, or the stock given back, either way.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if !errors.Is(err, ErrNotQueued) {
			return b.settle(ctx, sctx, r, res, err)
		}
		// The message does not exist, so the hold must not outlive this
		// call.
		b.giveBack(ctx, sctx, r, err)
		return ReserveResult{}, queueRefused(fmt.Errorf("%w: queue: %w", apperr.ErrUnavailable, err))
	}
	b.promise(ctx, r)
	return res, nil
}

// reserve is the stock's Reserve, where a replay whose first order is not
// decided yet (ErrUndecided) waits for the decision: it asks again, 5 ms
// apart doubling to 100 ms, for at most b.replayWait and while ctx lives.
// The answer that ends the wait is the decision's: a promised order is
// replayed, and a hold given back left its key forgotten, so the same call
// holds anew with r's own order id, a new attempt. Still undecided, the buy
// is refused 503 (undecidedReplay), never answered with that order: its
// gateway may yet fence it (seckill/RULES.md, "A 202 stands").
func (b *Buyer) reserve(ctx context.Context, r Reservation) (ReserveResult, error) {
	deadline := b.now().Add(b.replayWait)
	for wait := replayPoll; ; wait = min(2*wait, maxReplayPoll) {
		res, err := b.stock.Reserve(ctx, r)
		if !errors.Is(err, ErrUndecided) {
			return res, err
		}
		if b.now().Add(wait).After(deadline) || pause.For(ctx, wait) != nil {
			return ReserveResult{}, undecidedReplay(err)
		}
	}
}

// promise records r's written reservation as standing (Stock.Promise), so
// that replays of its key on any gateway may answer with it. A failure only
// costs those replays a wait for a worker to persist the order, which
// decides it too; the buy is answered 202 either way, since its message is
// written.
func (b *Buyer) promise(ctx context.Context, r Reservation) {
	if r.RequestKey == "" {
		return
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promiseWait)
	defer cancel()
	if err := b.stock.Promise(pctx, r); err != nil {
		b.log.WarnContext(ctx, "written reservation not promised in the stock; replays of its key wait for the workers",
			"order_id", r.OrderID, "voucher_id", r.VoucherID, "err", err)
	}
}

// settle ends a reservation whose message may still be written (the queue
// did not acknowledge it, or refused only its last attempt). With fences it
// is decided now: fenced, its stock goes back and the buy is refused; found
// persisted, the buy succeeded. Otherwise, or when the record cannot be
// reached, the hold stays: a worker persists it if the message lands, the
// reconciler releases it once the workers are past every message that could
// carry it, and a retry of the same Idempotency-Key is refused as undecided
// meanwhile (the hold is never promised). The caller is then told the
// outcome is unknown, not that nothing was bought: it must not give back
// what the attempt spent.
func (b *Buyer) settle(ctx, sctx context.Context, r Reservation, res ReserveResult, qerr error) (ReserveResult, error) {
	if b.fences != nil {
		fenced, err := b.fences.FenceOrder(sctx, r)
		switch {
		case err == nil && fenced:
			if b.giveBack(ctx, sctx, r, qerr) {
				if cerr := b.fences.ClearReleasePending(sctx, []int64{r.OrderID}); cerr != nil {
					// The sweepers' release loop finds the flag, and their
					// release finds nothing left to give back.
					b.log.WarnContext(ctx, "fenced order released; its release flag stays for the sweepers",
						"order_id", r.OrderID, "err", cerr)
				}
			}
			return ReserveResult{}, queueRefused(fmt.Errorf("%w: queue: order fenced as failed: %w", apperr.ErrUnavailable, qerr))
		case err == nil:
			// A worker persisted it: the write did land.
			b.promise(ctx, r)
			return res, nil
		}
		b.log.WarnContext(ctx, "unclear queue write not fenced; keeping the hold for the workers or the reconciler",
			"order_id", r.OrderID, "voucher_id", r.VoucherID, "queue_error", qerr, "fence_error", err)
	} else {
		b.log.WarnContext(ctx, "reservation queued without acknowledgement; keeping the hold for the workers or the reconciler",
			"order_id", r.OrderID, "voucher_id", r.VoucherID, "err", qerr)
	}
	return ReserveResult{}, fmt.Errorf("%w: %w: the order could not be confirmed yet: %w", apperr.ErrUnavailable, ErrOutcomeUnknown, qerr)
}

// giveBack releases r's hold, whose message does not exist or can never be
// persisted, forgetting its request key (a retry is a new attempt). It
// reports whether that is done; if not, the reconciler (or, for a fenced
// order, the sweepers' release loop) releases it later.
func (b *Buyer) giveBack(ctx, sctx context.Context, r Reservation, qerr error) bool {
	if _, err := b.stock.Release(sctx, r.VoucherID, r.OrderID, ReleaseUnsent); err != nil {
		b.log.ErrorContext(ctx, "reservation not queued and not released; it will be released later",
			"order_id", r.OrderID, "voucher_id", r.VoucherID, "queue_error", qerr, "release_error", err)
		return false
	}
	return true
}
