package gateway

// The waiting room (gateway/openapi.yaml, Queue): joining the line, reading
// one's place, and the admission pass on the buying path.
//
// The pass is judged in two steps. Right after the catalog, before any limit
// is charged, a pass that is missing, forged, someone else's, for another
// voucher or expired is refused from its signature alone, without I/O: a bot
// without a pass costs the fleet nothing. Then, as the last step before the
// buyer, after every limit, the pass is claimed in Redis (single use); if
// the buy fails for a reason that is not the shopper's (a dependency down,
// the sale paused) and surely made no order, the claim is given back so the
// pass can be used again until it expires. A buy whose order may still be
// made (seckill.ErrOutcomeUnknown) keeps its pass: only the retry of its
// Idempotency-Key, which replays that order, may use it again.

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// HeaderSeckillPass carries the admission pass on a buy of a voucher with a
// waiting room.
const HeaderSeckillPass = "Seckill-Pass"

// WaitingRoom is the fleet's waiting rooms (*waitroom.Room implements it).
type WaitingRoom interface {
	// Join puts the user in the line (keeping the place they have).
	Join(ctx context.Context, l waitroom.Line, userID int64) (waitroom.Status, error)
	// Status is the user's place; seckill.ErrNotFound when not in line.
	Status(ctx context.Context, l waitroom.Line, userID int64) (waitroom.Status, error)
	// Check judges a pass without I/O (seckill.ErrNotAdmitted).
	Check(voucherID, userID int64, pass string) (waitroom.Pass, error)
	// Claim uses a pass once (seckill.ErrNotAdmitted), replayable with the
	// same request key.
	Claim(ctx context.Context, voucherID, userID int64, pass, requestKey string) (waitroom.Pass, error)
	// Restore gives a claimed pass back.
	Restore(ctx context.Context, p waitroom.Pass) error
	// Stats are a room's figures.
	Stats(ctx context.Context, voucherID int64) (waitroom.Stats, error)
}

// RequestOrders finds the order a shopper's Idempotency-Key made of a
// voucher (cmd/seckill wires the stock's record of accepted requests, then
// PostgreSQL's). A keyed buy whose pass is refused is answered with it: a
// replay gets its order back whatever pass it carries.
type RequestOrders interface {
	RequestOrder(ctx context.Context, voucherID, userID int64, key string) (orderID int64, found bool, err error)
}

type queueIn struct {
	CaptchaID     string `json:"captcha_id"`
	CaptchaAnswer string `json:"captcha_answer"`
}

type queueStatsOut struct {
	Waiting    int64 `json:"waiting"`
	Admitted   int64 `json:"admitted"`
	Expired    int64 `json:"expired"`
	PassesUsed int64 `json:"passes_used"`
}

// queueLine is the voucher of the route and its line.
func (s *Server) queueLine(c *fiber.Ctx) (seckill.Voucher, waitroom.Line, error) {
	id, err := parseID(c.Params("id"), "the voucher id")
	if err != nil {
		return seckill.Voucher{}, waitroom.Line{}, err
	}
	v, err := s.deps.Catalog.Voucher(c.UserContext(), id)
	if err != nil {
		return seckill.Voucher{}, waitroom.Line{}, err
	}
	line, ok := waitroom.LineOf(v)
	if !ok {
		return v, line, seckill.Public(seckill.ErrNotFound, "this voucher has no waiting room: buy it directly")
	}
	if s.deps.Room == nil {
		return v, line, seckill.Public(seckill.ErrUnavailable, "the waiting room is not available on this server")
	}
	return v, line, nil
}

// joinQueue is POST /api/v1/vouchers/{id}/queue. A voucher that requires a
// captcha requires one to join; a shopper already in line keeps the place
// without one (a page opened again).
func (s *Server) joinQueue(c *fiber.Ctx) error {
	v, line, err := s.queueLine(c)
	if err != nil {
		return err
	}
	var in queueIn
	if err := decodeJSON(c, &in, true); err != nil {
		return err
	}
	ctx, uid := c.UserContext(), userIDOf(c)
	gate := s.deps.Gates.Captcha
	if v.CaptchaRequired && gate != nil {
		st, err := s.deps.Room.Status(ctx, line, uid)
		if err == nil {
			return c.JSON(waitroom.QueueJSON(st))
		}
		if !errors.Is(err, seckill.ErrNotFound) {
			return err
		}
	}
	var st waitroom.Status
	join := func(ctx context.Context, _ *Attempt) (Purchase, error) {
		var err error
		st, err = s.deps.Room.Join(ctx, line, uid)
		return Purchase{}, err
	}
	a := &Attempt{
		Request:       seckill.BuyRequest{VoucherID: v.ID, UserID: uid, Quantity: 1},
		Voucher:       v,
		ClientKey:     s.clientKey(c),
		CaptchaID:     in.CaptchaID,
		CaptchaAnswer: in.CaptchaAnswer,
	}
	if gate != nil {
		_, err = gate.Pass(ctx, a, join)
	} else {
		_, err = join(ctx, a)
	}
	if err != nil {
		return err
	}
	return c.JSON(waitroom.QueueJSON(st))
}

// queueStatus is GET /api/v1/vouchers/{id}/queue: 404 when not in line.
func (s *Server) queueStatus(c *fiber.Ctx) error {
	_, line, err := s.queueLine(c)
	if err != nil {
		return err
	}
	st, err := s.deps.Room.Status(c.UserContext(), line, userIDOf(c))
	if err != nil {
		return err
	}
	return c.JSON(waitroom.QueueJSON(st))
}

// checkPass is the pass's first step, right after the catalog: what its
// signature alone refuses costs no limit and no I/O.
func (s *Server) checkPass(a *Attempt) error {
	if a.Voucher.WaitingRoom == nil {
		return nil
	}
	if s.deps.Room == nil {
		return seckill.Public(seckill.ErrUnavailable, "the waiting room is not available on this server")
	}
	_, err := s.deps.Room.Check(a.Request.VoucherID, a.Request.UserID, a.Pass)
	if err != nil && a.Request.RequestKey != "" && s.deps.Replays != nil {
		// Maybe the replay of an order this key made (its pass since used
		// or expired, or not sent again): the last step looks it up, after
		// the limits, so that a flood of keyed buys without a pass costs
		// each sender its own budget and not a free lookup each.
		return nil
	}
	return err
}

// admitThenBuy is the last step: claim the pass (single use), buy, and give
// the claim back when the buy failed for a reason that is not the shopper's.
func (s *Server) admitThenBuy(ctx context.Context, a *Attempt) (Purchase, error) {
	if a.Voucher.WaitingRoom == nil {
		return s.dispatch(ctx, a)
	}
	if s.deps.Room == nil {
		return Purchase{}, seckill.Public(seckill.ErrUnavailable, "the waiting room is not available on this server")
	}
	pass, err := s.deps.Room.Claim(ctx, a.Request.VoucherID, a.Request.UserID, a.Pass, a.Request.RequestKey)
	if errors.Is(err, seckill.ErrNotAdmitted) {
		return s.replayWithoutPass(ctx, a, err)
	}
	if err != nil {
		return Purchase{}, err
	}
	p, err := s.dispatch(ctx, a)
	if err != nil && !passSpent(err) {
		if rerr := s.deps.Room.Restore(context.WithoutCancel(ctx), pass); rerr != nil {
			s.log.Warn("waiting room: cannot give a pass back", "voucher_id", a.Request.VoucherID,
				"user_id", a.Request.UserID, "err", rerr)
		}
	}
	return p, err
}

// replayWithoutPass answers a keyed buy whose pass was refused with the
// order its Idempotency-Key made before, as any replay is answered;
// refused stands when the key made none. It never sells: the order is the
// one the record names, and nothing reaches the buyer.
func (s *Server) replayWithoutPass(ctx context.Context, a *Attempt, refused error) (Purchase, error) {
	if a.Request.RequestKey == "" || s.deps.Replays == nil {
		return Purchase{}, refused
	}
	id, found, err := s.deps.Replays.RequestOrder(ctx, a.Request.VoucherID, a.Request.UserID, a.Request.RequestKey)
	if err != nil {
		return Purchase{}, err
	}
	if !found {
		return Purchase{}, refused
	}
	return Purchase{OrderID: id, Status: orders.StatusReserved, Replayed: true}, nil
}

// passSpent says whether a failed buy used its pass up: the answer is final
// for this shopper (sold out, over the limit, the sale over, a bad request),
// or the order may still be made (its hold is kept while the queue's
// acknowledgement is missing: giving the pass back would let it buy twice).
// Anything else (a dependency down, a pause) was not the shopper's doing
// and made no order, and the pass is given back.
func passSpent(err error) bool {
	for _, final := range []error{seckill.ErrSoldOut, seckill.ErrLimitExceeded, seckill.ErrEnded,
		seckill.ErrNotStarted, seckill.ErrInvalidInput, seckill.ErrConflict, seckill.ErrOutcomeUnknown} {
		if errors.Is(err, final) {
			return true
		}
	}
	return false
}

// queueStats is the queue figures of a voucher's stats, nil without a room.
func (s *Server) queueStats(ctx context.Context, id int64) (*queueStatsOut, error) {
	v, err := s.deps.Catalog.Voucher(ctx, id)
	if err != nil || v.WaitingRoom == nil || s.deps.Room == nil {
		return nil, nil //nolint:nilerr // the stats answer without the queue figures
	}
	st, err := s.deps.Room.Stats(ctx, id)
	if err != nil {
		return nil, err
	}
	return &queueStatsOut{Waiting: st.Waiting, Admitted: st.Admitted, Expired: st.Expired, PassesUsed: st.PassesUsed}, nil
}
