package gateway

// Payments through a provider (gateway/openapi.yaml, "Paying"): a shopper
// asks for a payment of an order, the provider's webhook reports what
// became of it, and an operator refunds a paid order.

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/flashsale/seckill/notify"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
	"github.com/flashsale/seckill/seckill/apperr"
)

// OrderPayments is the payment side of the order lifecycle
// (orders.Lifecycle implements it).
type OrderPayments interface {
	StartPayment(ctx context.Context, userID, orderID int64) (orders.Payment, bool, error)
	HandleEvent(ctx context.Context, ev payment.Event) (orders.EventOutcome, error)
	Refund(ctx context.Context, orderID int64) (orders.Order, error)
}

// HeaderStripeSignature carries Stripe's signature of a webhook delivery.
const HeaderStripeSignature = "Stripe-Signature"

// WebhookBodyLimit is the largest provider delivery taken: Stripe's events
// carry whole objects (a charge is a few KiB), over the API's own limit.
const WebhookBodyLimit = 64 << 10

// stripeWebhookPath is the route of Stripe's deliveries.
const stripeWebhookPath = "/api/v1/payments/webhooks/stripe"

// readLimit is the most the server reads of a body: Config.BodyLimit, or
// WebhookBodyLimit when Stripe's deliveries come here, every other route
// then holding its bodies to Config.BodyLimit itself (capBodies).
func (s *Server) readLimit() int {
	if s.deps.StripeEvents == nil {
		return s.cfg.BodyLimit
	}
	return max(s.cfg.BodyLimit, WebhookBodyLimit)
}

// capBodies refuses, on every route but the webhook's, a body over
// Config.BodyLimit that the server read because the webhook takes larger.
func (s *Server) capBodies(c *fiber.Ctx) error {
	if len(c.Request().Body()) > s.cfg.BodyLimit && c.Path() != stripeWebhookPath {
		return apperr.Publicf(apperr.ErrTooLarge, "the request body is over the limit of %d bytes", s.cfg.BodyLimit)
	}
	return c.Next()
}

// errNoPayments answers the payment routes of an instance without them.
var errNoPayments = fmt.Errorf("%w: payments are not taken on this instance", apperr.ErrUnavailable)

func (s *Server) startPayment(c *fiber.Ctx) error {
	id, err := parseID(c.Params("id"), "id", "the order id")
	if err != nil {
		return err
	}
	if s.deps.Payments == nil {
		return errNoPayments
	}
	uid := userIDOf(c)
	if s.deps.Holds != nil {
		// A draw winner's order is paid from their card hold
		// (orders/payment/README.md, "Holds of a draw"). Should the capture
		// fail, the order is paid as any other and the sweep settles the
		// hold.
		p, ok, err := s.deps.Holds.CaptureOrder(c.UserContext(), uid, id)
		if err != nil {
			s.log.WarnContext(c.UserContext(), "draw hold not captured; the order is paid as any other", "order_id", id, "err", err)
		}
		if ok {
			return c.Status(fiber.StatusCreated).JSON(paymentJSON(p))
		}
	}
	p, created, err := s.deps.Payments.StartPayment(c.UserContext(), uid, id)
	if err != nil {
		// Not in PostgreSQL yet may still be a live reservation of the caller's.
		if current, getErr := s.deps.Orders.Get(c.UserContext(), uid, id); getErr == nil &&
			current.UserID == uid && current.Status == orders.StatusReserved {
			return errStillReserved
		}
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(paymentJSON(p))
}

// paymentJSON is the Payment object of p.
func paymentJSON(p orders.Payment) api.Payment {
	return api.Payment{
		PaymentID: p.ID, OrderID: strconv.FormatInt(p.OrderID, 10), Provider: p.Provider,
		AmountCents: p.AmountCents, Currency: p.Currency, Status: string(p.Status), ClientSecret: p.ClientSecret,
	}
}

// stripeWebhook takes one of Stripe's deliveries. The signature is over the
// exact bytes sent, so the body is read raw; the route has no shopper's
// token and no per-address limit, which would refuse the provider's
// retries. A delivery whose signature, age or money does not hold is 400
// invalid_signature and changes nothing; any other is 200, repeated or not.
func (s *Server) stripeWebhook(c *fiber.Ctx) error {
	if s.deps.StripeEvents == nil {
		return fmt.Errorf("%w: this instance takes no Stripe payments", payment.ErrInvalidEvent)
	}
	if s.deps.Payments == nil {
		return errNoPayments
	}
	// Fiber's body is a reused buffer: the event outlives nothing of this
	// request, but the verifier keeps slices of it in the event it returns.
	body := append([]byte(nil), c.Body()...)
	ev, err := s.deps.StripeEvents.Verify(body, c.Get(HeaderStripeSignature))
	if err != nil {
		if s.deps.PaymentMetrics != nil {
			s.deps.PaymentMetrics.InvalidEvent()
		}
		return err
	}
	out, err := s.deps.Payments.HandleEvent(c.UserContext(), ev)
	if err != nil {
		return err
	}
	return c.JSON(api.WebhookAnswer{Received: true, Result: out.Result})
}

// refundOrder is an operator's refund: the answer is the order, still paid
// until the provider confirms the refund (then refunded, its unit back on
// sale), or refunded at once without a provider payment (the demo one).
func (s *Server) refundOrder(c *fiber.Ctx, act *seckill.Action) error {
	id, err := parseID(c.Params("id"), "id", "the order id")
	if err != nil {
		return err
	}
	if s.deps.Payments == nil {
		return errNoPayments
	}
	o, err := s.deps.Payments.Refund(c.UserContext(), id)
	if err != nil {
		return err
	}
	describe(act, seckill.ActionRefundOrder, "order:"+idString(id), c.Body())
	if s.deps.Operators != nil {
		if _, err := s.deps.Operators.RecordAction(c.UserContext(), *act); err != nil {
			return fmt.Errorf("the refund of order %d is asked, but its entry in the operators' trail was not written; send the refund again: %w", id, err)
		}
	}
	s.log.LogAttrs(c.UserContext(), slog.LevelInfo, "order refunded by an operator", slog.Int64("order_id", id),
		slog.String("status", string(o.Status)), slog.String("operator", act.Operator), slog.String("request_id", act.RequestID))
	return c.JSON(notify.OrderJSON(o))
}
