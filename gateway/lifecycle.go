package gateway

import (
	"context"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/apperr"
)

// OrderLifecycle moves a shopper's persisted order on (orders.Lifecycle
// implements it). Each call is one conditional update: racing a payment
// timeout, exactly one wins and the other gets apperr.ErrConflict.
type OrderLifecycle interface {
	Pay(ctx context.Context, userID, orderID int64) (orders.Order, error)
	Cancel(ctx context.Context, userID, orderID int64) (orders.Order, error)
}

// errStillReserved answers a pay or cancel of an order the workers have not
// persisted yet: it will be payable in a moment, so say so.
var errStillReserved = fmt.Errorf("%w: the order is still being placed; try again in a moment", apperr.ErrConflict)

func (s *Server) payOrder(c *fiber.Ctx) error {
	return s.moveOrder(c, OrderLifecycle.Pay)
}

func (s *Server) cancelOrder(c *fiber.Ctx) error {
	return s.moveOrder(c, OrderLifecycle.Cancel)
}

// moveOrder runs one transition on the caller's order and answers with the
// order as it now is.
func (s *Server) moveOrder(c *fiber.Ctx, move func(OrderLifecycle, context.Context, int64, int64) (orders.Order, error)) error {
	id, err := parseID(c.Params("id"), "the order id")
	if err != nil {
		return err
	}
	if s.deps.Lifecycle == nil {
		return fmt.Errorf("%w: orders cannot be paid or cancelled on this instance", apperr.ErrUnavailable)
	}
	uid := userIDOf(c)
	o, err := move(s.deps.Lifecycle, c.UserContext(), uid, id)
	if err == nil {
		return c.JSON(notify.OrderJSON(o))
	}
	// Not in PostgreSQL yet may still be a live reservation of the caller's.
	if current, getErr := s.deps.Orders.Get(c.UserContext(), uid, id); getErr == nil &&
		current.UserID == uid && current.Status == orders.StatusReserved {
		return errStillReserved
	}
	return err
}
