package gateway

// A sale by draw (seckill/draw/README.md): joining the queue of a draw
// voucher is an entry, its place is the draw's result, and the operator
// exports every entry for an audit.

import (
	"context"
	"errors"
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/draw"
	"github.com/flashsale/seckill/seckill/waitroom"
)

// Draws is the sales by draw (*draw.Store implements it).
type Draws interface {
	// Enter enters the user once; seckill.ErrNotStarted before the window,
	// seckill.ErrEnded for a new entry from begin_at.
	Enter(ctx context.Context, l waitroom.Line, userID int64) (draw.EntryStatus, error)
	// Entered reads the user's entry.
	Entered(ctx context.Context, l waitroom.Line, userID int64) (draw.EntryStatus, error)
	// Info reads the draw: commitment, seed once drawn, cut-off.
	Info(ctx context.Context, voucherID int64) (draw.Info, error)
	// Export writes every entry as CSV (draw.ErrNotDrawn before the draw).
	Export(ctx context.Context, l waitroom.Line, w io.Writer) error
}

// enterDraw is POST /api/v1/vouchers/{id}/queue of a draw voucher: an
// entry, with the captcha when the voucher requires one (an entrant
// entering again needs none).
func (s *Server) enterDraw(c *fiber.Ctx, v seckill.Voucher, line waitroom.Line, in api.QueueJoin) error {
	if s.deps.Draws == nil {
		return apperr.Public(apperr.ErrUnavailable, "the draws are not available on this server")
	}
	ctx, uid := c.UserContext(), userIDOf(c)
	if v.CaptchaRequired && s.pipeline.HasCaptcha() {
		e, err := s.deps.Draws.Entered(ctx, line, uid)
		if err != nil {
			return err
		}
		if !e.Entered {
			if err := s.joinCaptcha(c, v, in); err != nil {
				return err
			}
		}
	}
	if _, err := s.deps.Draws.Enter(ctx, line, uid); err != nil {
		if !errors.Is(err, seckill.ErrEnded) {
			return err
		}
		// From begin_at an entrant reads the result; a newcomer is refused.
		if q, qerr := s.drawPlace(ctx, line, uid); qerr == nil {
			return c.JSON(q)
		}
		return err
	}
	q, err := s.drawPlace(ctx, line, uid)
	if err != nil {
		return err
	}
	return c.JSON(q)
}

// drawPlace is the user's queue object in line's draw: entered until the
// draw, then the result with the user's own ticket; 404 for a non-entrant.
func (s *Server) drawPlace(ctx context.Context, line waitroom.Line, uid int64) (api.Queue, error) {
	info, err := s.deps.Draws.Info(ctx, line.VoucherID)
	if err != nil {
		return api.Queue{}, err
	}
	if info.Seed == nil {
		e, err := s.deps.Draws.Entered(ctx, line, uid)
		if err != nil {
			return api.Queue{}, err
		}
		if !e.Entered {
			return api.Queue{}, apperr.Public(apperr.ErrNotFound, "you have not entered this voucher's draw")
		}
		return api.Queue{VoucherID: idString(line.VoucherID), State: string(waitroom.StateEntered)}, nil
	}
	st, err := s.deps.Room.Status(ctx, line, uid)
	if err != nil {
		if errors.Is(err, apperr.ErrNotFound) {
			return api.Queue{}, apperr.Public(apperr.ErrNotFound, "you did not enter this voucher's draw")
		}
		return api.Queue{}, err
	}
	q := waitroom.QueueJSON(st)
	ticket := draw.TicketOf(*info.Seed, line.VoucherID, uid).String()
	q.Ticket = &ticket
	return q, nil
}
