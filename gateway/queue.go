package gateway

// The waiting room (gateway/openapi.yaml, Queue): joining the line and
// reading one's place. The admission pass on the buying path is the buy's
// (gateway/buy/pass.go).

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/gateway/buy"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// HeaderSeckillPass carries the admission pass on a buy of a voucher with a
// waiting room.
const HeaderSeckillPass = "Seckill-Pass"

// WaitingRoom is the fleet's waiting rooms (*waitroom.Room implements it).
// The passes on the buying path are the buy's (buy.Room).
type WaitingRoom interface {
	// Join puts the user in the line (keeping the place they have).
	Join(ctx context.Context, l waitroom.Line, userID int64) (waitroom.Status, error)
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

// routeLine is the voucher of the route and its waiting room's line; ok is
// false for a voucher without one. Each route says what that means for it.
func (s *Server) routeLine(c *fiber.Ctx) (v seckill.Voucher, line waitroom.Line, ok bool, err error) {
	id, err := parseID(c.Params("id"), "the voucher id")
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
	var in api.QueueJoin
	if err := decodeJSON(c, &in, true); err != nil {
		return err
	}
	if line.Draw {
		return s.enterDraw(c, v, line, in)
	}
	ctx, uid := c.UserContext(), userIDOf(c)
	if v.CaptchaRequired && s.pipeline.HasCaptcha() {
		st, err := s.deps.Room.Status(ctx, line, uid)
		if err == nil {
			return c.JSON(waitroom.QueueJSON(st))
		}
		if !errors.Is(err, apperr.ErrNotFound) {
			return err
		}
	}
	if err := s.joinCaptcha(c, v, in); err != nil {
		return err
	}
	st, err := s.deps.Room.Join(ctx, line, uid)
	if err != nil {
		return err
	}
	return c.JSON(waitroom.QueueJSON(st))
}

// joinCaptcha is the captcha of a join (or a draw's entry), as the buy asks
// it.
func (s *Server) joinCaptcha(c *fiber.Ctx, v seckill.Voucher, in api.QueueJoin) error {
	a := &buy.Attempt{
		Request:       seckill.BuyRequest{VoucherID: v.ID, UserID: userIDOf(c), Quantity: 1},
		Voucher:       v,
		ClientKey:     s.clientKey(c),
		CaptchaID:     in.CaptchaID,
		CaptchaAnswer: in.CaptchaAnswer,
	}
	return s.pipeline.Captcha(c.UserContext(), a)
}

// queueStatus is GET /api/v1/vouchers/{id}/queue: 404 when not in line.
func (s *Server) queueStatus(c *fiber.Ctx) error {
	_, line, err := s.queueLine(c)
	if err != nil {
		return err
	}
	if line.Draw {
		if s.deps.Draws == nil {
			return apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
		}
		q, err := s.drawPlace(c.UserContext(), line, userIDOf(c))
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
