package gateway

// A shopper's orders (gateway/openapi.yaml, /api/v1/orders): the list, one
// order, and paying or cancelling it. An order still only reserved in Redis
// is one of them as much as a row of PostgreSQL (OrderReader).

import (
	"context"
	"fmt"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// OrderLifecycle moves a shopper's persisted order on (orders.Lifecycle
// implements it). Each call is one conditional update: racing a payment
// timeout, exactly one wins and the other gets apperr.ErrConflict.
type OrderLifecycle interface {
	Pay(ctx context.Context, userID, orderID int64) (orders.Order, error)
	Cancel(ctx context.Context, userID, orderID int64) (orders.Order, error)
}

// orderStatuses are the values of GET /api/v1/orders?status=, those of
// the order's status in gateway/openapi.yaml.
var orderStatuses = [...]orders.Status{orders.StatusReserved, orders.StatusCreated,
	orders.StatusPaid, orders.StatusCancelled, orders.StatusFailed, orders.StatusRefunded}

// listOrders is GET /api/v1/orders: one page of the caller's orders,
// newest first (by order id, which is time-ordered: a page is a seek from
// the last id of the one before, never an offset).
func (s *Server) listOrders(c *fiber.Ctx) error {
	uid := userIDOf(c)
	var f apperr.Fields
	q := parsePage(c, cursorOrders, &f)
	page := orders.Page{Before: q.after, Limit: q.limit}
	if raw := c.Query("status"); raw != "" || c.Request().URI().QueryArgs().Has("status") {
		page.Status = orders.Status(raw)
		if !slices.Contains(orderStatuses[:], page.Status) {
			f.Addf("status", "status must be one of reserved, created, paid, cancelled, failed and refunded")
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	list, more, err := s.deps.Orders.Page(c.UserContext(), uid, page)
	if err != nil {
		return err
	}
	if more && len(list) > 0 {
		setNextLink(c, cursorOrders, list[len(list)-1].ID)
	}
	out := make([]api.Order, 0, len(list))
	for _, o := range list {
		if o.UserID != uid {
			continue // never show someone else's order, whatever the reader did
		}
		out = append(out, notify.OrderJSON(o))
	}
	return c.JSON(out)
}

func (s *Server) getOrder(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the order id")
	if err != nil {
		return err
	}
	uid := userIDOf(c)
	o, err := s.deps.Orders.Get(c.UserContext(), uid, id)
	if err != nil {
		return err
	}
	if o.UserID != uid {
		// The contract: someone else's order is 404, not 403: its existence is
		// not the caller's business.
		return apperr.ErrNotFound
	}
	return c.JSON(notify.OrderJSON(o))
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
	id, err := parseID(c.Params("id"), "id", "the order id")
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
