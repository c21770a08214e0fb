package gateway

// The waiting room (gateway/openapi.yaml, Queue): joining the line and
// reading one's place. The admission pass on the buying path is the buy's
// (gateway/buy/pass.go).
//
// A sale by draw (seckill/draw/README.md) has the same two routes: joining
// the queue of a draw voucher is an entry, and its place is the draw's
// result. The operator exports every entry for an audit (admin.go).

import (
	"context"
	"errors"
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/eligibility"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// HeaderSeckillPass carries the admission pass on a buy of a voucher with a
// waiting room.
const HeaderSeckillPass = "Seckill-Pass"

// WaitingRoom is the fleet's waiting rooms (*waitroom.Room implements it).
// The passes on the buying path are the buy's (buy.Room).
type WaitingRoom interface {
	// JoinIn puts the user in the line in lane (keeping the place they
	// have).
	JoinIn(ctx context.Context, l waitroom.Line, userID int64, lane waitroom.Lane) (waitroom.Status, error)
	// Status is the user's place; apperr.ErrNotFound when not in line.
	Status(ctx context.Context, l waitroom.Line, userID int64) (waitroom.Status, error)
	// Stats are a room's figures.
	Stats(ctx context.Context, voucherID int64) (waitroom.Stats, error)
	// Reopen opens again a room closed because every unit was paid for,
	// once stock was added.
	Reopen(ctx context.Context, l waitroom.Line) error
}

// AdmitRates knows the admission rate in force of every room
// (*waitroom.Adapter implements it).
type AdmitRates interface {
	// Line is l with its rate in force.
	Line(l waitroom.Line) waitroom.Line
}

// Draws is the sales by draw (*draw.Store implements it).
type Draws interface {
	// CommitBeacon commits a new draw voucher to its beacon round.
	CommitBeacon(ctx context.Context, v seckill.Voucher) (draw.BeaconCommitment, error)
	// Face reads a draw's public face from the record (or memory within a
	// second).
	Face(ctx context.Context, voucherID int64) (seckill.DrawFace, error)
	// Enter enters the user once; seckill.ErrNotStarted before the window,
	// seckill.ErrEnded for a new entry from begin_at (or in a void draw).
	Enter(ctx context.Context, l waitroom.Line, userID int64) (draw.EntryStatus, error)
	// Entered reads the user's entry.
	Entered(ctx context.Context, l waitroom.Line, userID int64) (draw.EntryStatus, error)
	// EntryList is every entry id, sorted, one a line (draw.ErrNotDrawn
	// before the draw).
	EntryList(ctx context.Context, voucherID int64) ([]byte, error)
	// Export writes every entry as CSV (draw.ErrNotDrawn before the draw).
	Export(ctx context.Context, l waitroom.Line, w io.Writer) error
}

// DrawHolds holds a draw entrant's card (*orders.Holds implements it).
type DrawHolds interface {
	// Enter holds the user's card for v's draw, or returns their hold.
	Enter(ctx context.Context, v seckill.Voucher, userID int64) (orders.Hold, error)
	// CaptureOrder takes the user's order's amount from their hold (ok
	// false: no held hold for it).
	CaptureOrder(ctx context.Context, userID, orderID int64) (orders.Payment, bool, error)
}

// routeLine is the voucher of the route and its waiting room's line; ok is
// false for a voucher without one. Each route says what that means for it.
func (s *Server) routeLine(c *fiber.Ctx) (v seckill.Voucher, line waitroom.Line, ok bool, err error) {
	id, err := parseID(c.Params("id"), "id", "the voucher id")
	if err != nil {
		return v, line, false, err
	}
	if v, err = s.deps.Catalog.Voucher(c.UserContext(), id); err != nil {
		return v, line, false, err
	}
	line, ok = waitroom.LineOf(v)
	return v, line, ok, nil
}

// queueLine is the voucher of the route and its line.
func (s *Server) queueLine(c *fiber.Ctx) (seckill.Voucher, waitroom.Line, error) {
	v, line, ok, err := s.routeLine(c)
	if err != nil {
		return v, line, err
	}
	if !ok {
		return v, line, apperr.Public(apperr.ErrNotFound, "this voucher has no waiting room: buy it directly")
	}
	if s.deps.Room == nil {
		return v, line, apperr.Public(apperr.ErrUnavailable, "the waiting room is not available on this server")
	}
	if s.deps.AdmitRates != nil {
		line = s.deps.AdmitRates.Line(line)
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
	// A header too long to be a token is refused whatever the voucher
	// asks: the contract bounds it (openapi.yaml).
	if len(c.Get(HeaderEntryToken)) > eligibility.MaxTokenLen {
		return apperr.InvalidField(HeaderEntryToken, "%s is longer than %d bytes: send the token the merchant gave, as it is", HeaderEntryToken, eligibility.MaxTokenLen)
	}
	var in api.QueueJoin
	if err := decodeJSON(c, &in, true); err != nil {
		return err
	}
	if err := checkNonce(in.ChallengeAnswer); err != nil {
		return err
	}
	if line.Draw {
		return s.enterDraw(c, v, line, in)
	}
	ctx, uid := c.UserContext(), userIDOf(c)
	// A shopper already in line keeps the place: the captcha and the
	// entry were judged when they joined.
	if (v.CaptchaRequired && s.pipeline.HasCaptcha()) || v.ProofOfWork || hasEntryRule(v) {
		st, err := s.deps.Room.Status(ctx, line, uid)
		if err == nil {
			return c.JSON(waitroom.QueueJSON(st))
		}
		if !errors.Is(err, apperr.ErrNotFound) {
			return err
		}
	}
	entry, err := s.entryCheck(c, v)
	if err != nil {
		return err
	}
	if err := s.joinCaptcha(c, v, in); err != nil {
		return err
	}
	if err := s.entryClaim(c, v, entry); err != nil {
		return err
	}
	st, err := s.deps.Room.JoinIn(ctx, line, uid, laneOf(v, entry))
	if err != nil {
		return err
	}
	return c.JSON(waitroom.QueueJSON(st))
}

// joinCaptcha is the captcha or the proof of work of a join (or a draw's
// entry), as the buy asks it: missing, wrong, expired or used is 400
// (captcha_invalid, challenge_invalid).
func (s *Server) joinCaptcha(c *fiber.Ctx, v seckill.Voucher, in api.QueueJoin) error {
	a := &buy.Attempt{
		Request:         seckill.BuyRequest{VoucherID: v.ID, UserID: userIDOf(c), Quantity: 1},
		Voucher:         v,
		ClientKey:       s.clientKey(c),
		CaptchaID:       in.CaptchaID,
		CaptchaAnswer:   in.CaptchaAnswer,
		ChallengeID:     in.ChallengeID,
		ChallengeAnswer: in.ChallengeAnswer,
	}
	return s.pipeline.Captcha(c.UserContext(), a)
}

// queueStatus is GET /api/v1/vouchers/{id}/queue: 404 when not in line.
func (s *Server) queueStatus(c *fiber.Ctx) error {
	v, line, err := s.queueLine(c)
	if err != nil {
		return err
	}
	if line.Draw {
		if s.deps.Draws == nil {
			return apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
		}
		q, err := s.drawPlace(c.UserContext(), v, line, userIDOf(c))
		if err != nil {
			return err
		}
		return c.JSON(q)
	}
	st, err := s.deps.Room.Status(c.UserContext(), line, userIDOf(c))
	if err != nil {
		return err
	}
	return c.JSON(waitroom.QueueJSON(st))
}

// enterDraw is POST /api/v1/vouchers/{id}/queue of a draw voucher: an
// entry, with the captcha when the voucher requires one (an entrant
// entering again needs none).
func (s *Server) enterDraw(c *fiber.Ctx, v seckill.Voucher, line waitroom.Line, in api.QueueJoin) error {
	if s.deps.Draws == nil {
		return apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
	}
	ctx, uid := c.UserContext(), userIDOf(c)
	if (v.CaptchaRequired && s.pipeline.HasCaptcha()) || v.ProofOfWork || hasEntryRule(v) {
		e, err := s.deps.Draws.Entered(ctx, line, uid)
		if err != nil {
			return err
		}
		if !e.Entered {
			// In a draw the lane changes nothing: every entry has the
			// same chance.
			entry, err := s.entryCheck(c, v)
			if err != nil {
				return err
			}
			if err := s.joinCaptcha(c, v, in); err != nil {
				return err
			}
			if err := s.entryClaim(c, v, entry); err != nil {
				return err
			}
		}
	}
	if _, err := s.deps.Draws.Enter(ctx, line, uid); err != nil {
		if !errors.Is(err, seckill.ErrEnded) {
			return err
		}
		// From begin_at an entrant reads the result; a newcomer is refused.
		if q, qerr := s.drawPlace(ctx, v, line, uid); qerr == nil {
			return c.JSON(q)
		}
		return err
	}
	q, err := s.drawPlace(ctx, v, line, uid)
	if err != nil {
		return err
	}
	if v.WaitingRoom.DrawHold {
		// The entry stands from here: should the hold fail, entering again
		// makes it (orders/payment/README.md, "Holds of a draw").
		if s.deps.Holds == nil {
			return errNoHolds
		}
		h, err := s.deps.Holds.Enter(ctx, v, uid)
		if err != nil {
			return err
		}
		q.Hold = &api.DrawHold{PaymentID: h.PaymentID, Provider: h.Provider, AmountCents: h.AmountCents,
			Currency: h.Currency, Status: string(h.State), ClientSecret: h.ClientSecret}
	}
	return c.JSON(q)
}

// errNoHolds answers an entry, or the making of a voucher, that needs card
// holds on an instance whose payment provider holds no money.
var errNoHolds = apperr.Public(apperr.ErrUnavailable, "card holds are not taken on this instance")

// drawPlace is the user's queue object in line's draw, with their entry
// id: entered until the draw, then the result with the user's own ticket;
// void for everyone when the draw is void; 404 for a non-entrant. The
// draw's face comes from the catalog's memory (v.Draw), the entry from
// Redis: no database query per shopper.
func (s *Server) drawPlace(ctx context.Context, v seckill.Voucher, line waitroom.Line, uid int64) (api.Queue, error) {
	var face seckill.DrawFace
	if v.Draw != nil {
		face = *v.Draw
	}
	if face.Void {
		return api.Queue{VoucherID: idString(line.VoucherID), State: string(waitroom.StateVoid)}, nil
	}
	e, err := s.deps.Draws.Entered(ctx, line, uid)
	if err != nil {
		return api.Queue{}, err
	}
	r, drawn := draw.RandomnessFrom(face)
	if !e.Entered {
		if drawn {
			return api.Queue{}, apperr.Public(apperr.ErrNotFound, "you did not enter this voucher's draw")
		}
		return api.Queue{}, apperr.Public(apperr.ErrNotFound, "you have not entered this voucher's draw")
	}
	entry := e.EntryID
	if !drawn {
		return api.Queue{VoucherID: idString(line.VoucherID), State: string(waitroom.StateEntered), EntryID: &entry}, nil
	}
	st, err := s.deps.Room.Status(ctx, line, uid)
	if err != nil {
		if errors.Is(err, apperr.ErrNotFound) {
			return api.Queue{}, apperr.Public(apperr.ErrNotFound, "you did not enter this voucher's draw")
		}
		return api.Queue{}, err
	}
	q := waitroom.QueueJSON(st)
	ticket := draw.TicketOf(r, line.VoucherID, entry).String()
	q.Ticket, q.EntryID = &ticket, &entry
	return q, nil
}

// drawEntryList is GET /api/v1/vouchers/{id}/draw/entries (anyone): every
// entry id of the draw, sorted, one a line, once it is made; from memory,
// and a CDN may keep it (it never changes).
func (s *Server) drawEntryList(c *fiber.Ctx) error {
	_, line, ok, err := s.routeLine(c)
	if err != nil {
		return err
	}
	if !ok || !line.Draw {
		return apperr.Public(apperr.ErrNotFound, "this voucher is not sold by draw, so it has no entries")
	}
	if s.deps.Draws == nil {
		return apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
	}
	b, err := s.deps.Draws.EntryList(c.UserContext(), line.VoucherID)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/plain; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "public, max-age=3600, immutable")
	return c.Send(b)
}
