package buy

// The waiting room's admission pass on the buying path (steps 2, 9 and 12
// of Pipeline).
//
// The pass is judged in two steps. Right after the catalog, before any limit
// is charged, a pass that is missing, forged, someone else's, for another
// voucher or expired is refused from its signature alone, without I/O: a bot
// without a pass costs the fleet nothing. Then, as the last step before the
// seller, after every limit, the pass is claimed in Redis (single use); if
// the buy fails for a reason that is not the shopper's (a dependency down,
// the sale paused) and surely made no order, the claim is given back so the
// pass can be used again until it expires. A buy whose order may still be
// made (seckill.ErrOutcomeUnknown) keeps its pass: only the retry of its
// Idempotency-Key, which replays that order, may use it again. Either way
// the claim is settled when the seller has answered: until then the room
// counts it against the units it may admit to, as its reservation may not
// be in the stock yet.

import (
	"context"
	"errors"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Room is what the buy needs of the waiting rooms (*waitroom.Room
// implements it).
type Room interface {
	// Check judges a pass without I/O (seckill.ErrNotAdmitted).
	Check(voucherID, userID int64, pass string) (waitroom.Pass, error)
	// Claim uses a pass once (seckill.ErrNotAdmitted), replayable with the
	// same request key.
	Claim(ctx context.Context, voucherID, userID int64, pass, requestKey string) (waitroom.Pass, error)
	// Restore gives a claimed pass back.
	Restore(ctx context.Context, p waitroom.Pass) error
	// Spend settles a claimed pass whose buy is over without giving it
	// back.
	Spend(ctx context.Context, p waitroom.Pass) error
}

// RequestOrders finds the order a shopper's Idempotency-Key made of a
// voucher (cmd/seckill wires the stock's record of accepted requests, then
// PostgreSQL's). A keyed buy whose pass is refused is answered with it: a
// replay gets its order back whatever pass it carries. An order whose fate
// is not decided yet is an error (seckill.ErrUndecided, 503), never an
// answer: it could still be fenced (seckill/RULES.md, "A 202 stands").
type RequestOrders interface {
	RequestOrder(ctx context.Context, voucherID, userID int64, key string) (orderID int64, found bool, err error)
}

// errNoRoom is the answer for a voucher with a waiting room on a pipeline
// without one.
func errNoRoom() error {
	return apperr.Public(apperr.ErrUnavailable, "the waiting room is not available on this server")
}

// checkPass is step 2, right after the catalog: what the pass's signature
// alone refuses costs no limit and no I/O.
func (p *Pipeline) checkPass(a *Attempt) error {
	if a.Voucher.WaitingRoom == nil {
		return nil
	}
	if p.room == nil {
		return errNoRoom()
	}
	_, err := p.room.Check(a.Request.VoucherID, a.Request.UserID, a.Pass)
	if err != nil && a.Request.RequestKey != "" && p.replays != nil {
		// Maybe the replay of an order this key made (its pass since used
		// or expired, or not sent again): step 9 looks it up, after the
		// limits, so that a flood of keyed buys without a pass costs each
		// sender its own budget and not a free look-up each.
		return nil
	}
	return err
}

// claimPass is step 9: the pass is used (single use). When done, the attempt
// ends here with pur and err (a refused pass, or the replay of the order its
// key made); otherwise claimed is the pass to give back, nil without a
// waiting room.
func (p *Pipeline) claimPass(ctx context.Context, a *Attempt) (claimed *waitroom.Pass, done bool, pur Purchase, err error) {
	if a.Voucher.WaitingRoom == nil {
		return nil, false, Purchase{}, nil
	}
	if p.room == nil {
		return nil, true, Purchase{}, errNoRoom()
	}
	pass, err := p.room.Claim(ctx, a.Request.VoucherID, a.Request.UserID, a.Pass, a.Request.RequestKey)
	if errors.Is(err, seckill.ErrNotAdmitted) {
		pur, err = p.replayWithoutPass(ctx, a, err)
		return nil, true, pur, err
	}
	if err != nil {
		return nil, true, Purchase{}, err
	}
	return &pass, false, Purchase{}, nil
}

// settlePass is step 12: the claimed pass is given back when the sale
// failed for a reason that is not the shopper's, and spent otherwise. A
// spend that fails leaves the claim holding one unit back from the room
// until the room's claim TTL: late admissions, never too many.
func (p *Pipeline) settlePass(ctx context.Context, a *Attempt, claimed *waitroom.Pass, err error) {
	if claimed == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err == nil || passSpent(err) {
		if serr := p.room.Spend(ctx, *claimed); serr != nil {
			p.log.Warn("waiting room: cannot settle a used pass", "voucher_id", a.Request.VoucherID,
				"user_id", a.Request.UserID, "err", serr)
		}
		return
	}
	if rerr := p.room.Restore(ctx, *claimed); rerr != nil {
		p.log.Warn("waiting room: cannot give a pass back", "voucher_id", a.Request.VoucherID,
			"user_id", a.Request.UserID, "err", rerr)
	}
}

// replayWithoutPass answers a keyed buy whose pass was refused with the
// order its Idempotency-Key made before, as any replay is answered;
// refused stands when the key made none. It never sells: the order is the
// one the record names, and nothing reaches the seller.
func (p *Pipeline) replayWithoutPass(ctx context.Context, a *Attempt, refused error) (Purchase, error) {
	if a.Request.RequestKey == "" || p.replays == nil {
		return Purchase{}, refused
	}
	id, found, err := p.replays.RequestOrder(ctx, a.Request.VoucherID, a.Request.UserID, a.Request.RequestKey)
	if err != nil {
		return Purchase{}, err
	}
	if !found {
		return Purchase{}, refused
	}
	return Purchase{OrderID: id, Status: orders.StatusReserved, Replayed: true}, nil
}

// passSpent says whether a failed buy used its pass up: the answer is final
// for this shopper (over the limit, the sale over, a bad request), or the
// order may still be made (its hold is kept while the queue's
// acknowledgement is missing: giving the pass back would let it buy twice).
// Anything else (a dependency down, a pause) was not the shopper's doing
// and made no order, and the pass is given back. So is a sold-out answer:
// units come back (a hold timing out, a cancel), and an admitted shopper
// whose buy lost a race to the last unit keeps the turn, ahead of those
// still in line, until the pass expires.
func passSpent(err error) bool {
	for _, final := range []error{seckill.ErrLimitExceeded, seckill.ErrEnded,
		seckill.ErrNotStarted, apperr.ErrInvalidInput, apperr.ErrConflict, seckill.ErrOutcomeUnknown} {
		if errors.Is(err, final) {
			return true
		}
	}
	return false
}
