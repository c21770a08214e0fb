package buy

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// WithTracer returns a copy of p whose buy runs under a span ("buy") with a
// child span for each step that does I/O or charges a budget: the catalog,
// the three limits, the strikes, the captcha, the breaker and the seller.
// The spans are made here, by wrapping the steps, so that no step knows of
// tracing and a new step is traced by adding one line below. A nil tracer
// returns p itself: a process without tracing runs the steps unwrapped and
// pays nothing per buy (BenchmarkBuyTraced in the gateway measures both).
// The steps without I/O (fast refusal, sold-out flag, pass) have no span:
// they cost less than one.
func (p *Pipeline) WithTracer(t trace.Tracer) *Pipeline {
	if t == nil {
		return p
	}
	c := *p
	c.tracer = t
	c.catalog = tracedCatalog{t, p.catalog}
	s := &c.steps
	if s.Address != nil {
		s.Address = tracedLimit{t, "buy " + StepAddressLimit, s.Address}
	}
	if s.User != nil {
		s.User = tracedLimit{t, "buy " + StepUserLimit, s.User}
	}
	if s.Global != nil {
		s.Global = tracedLimit{t, "buy " + StepGlobalLimit, s.Global}
	}
	if s.Hoard != nil {
		s.Hoard = tracedHoard{t, s.Hoard}
	}
	if s.Captcha != nil {
		s.Captcha = tracedCaptcha{t, s.Captcha}
	}
	if s.Breaker != nil {
		s.Breaker = tracedBreaker{t, s.Breaker}
	}
	c.seckill = tracedSeller{t, p.seckill}
	c.sync = tracedSeller{t, p.sync}
	return &c
}

// span starts a step's span.
func span(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.Start(ctx, name, opts...)
}

// done ends s. A refusal (sold out, rate limited) is the step's answer,
// noted as an attribute; only what failed the shopper through no fault of
// theirs marks the span failed, so that the sampling keeps it
// (seckill/tracing).
func done(s trace.Span, err error) {
	if err != nil {
		s.SetAttributes(attribute.String("seckill.refusal", err.Error()))
		if !answered(err) {
			s.RecordError(err)
			s.SetStatus(codes.Error, err.Error())
		}
	}
	s.End()
}

// startBuy starts the buy's own span when p is traced.
func (p *Pipeline) startBuy(ctx context.Context, a *Attempt) (context.Context, trace.Span) {
	if p.tracer == nil {
		return ctx, nil
	}
	ctx, s := p.tracer.Start(ctx, "buy", trace.WithAttributes(
		attribute.Int64("seckill.voucher_id", a.Request.VoucherID),
		attribute.Int64("seckill.user_id", a.Request.UserID),
		attribute.Int64("seckill.quantity", a.Request.Quantity),
		attribute.Bool("seckill.keyed", a.Request.RequestKey != "")))
	return ctx, s
}

// endBuy ends the buy's span with what it produced.
func endBuy(s trace.Span, pur Purchase, err error) {
	if s == nil {
		return
	}
	if err == nil {
		s.SetAttributes(attribute.Int64("seckill.order_id", pur.OrderID), attribute.Bool("seckill.replayed", pur.Replayed))
	}
	done(s, err)
}

// answered reports whether err is a refusal that answers the shopper
// (4xx), not a failure of the system.
func answered(err error) bool {
	for _, a := range [...]error{
		apperr.ErrInvalidInput, apperr.ErrCaptchaInvalid, apperr.ErrUnauthenticated, apperr.ErrForbidden,
		apperr.ErrNotFound, apperr.ErrConflict, apperr.ErrRateLimited, apperr.ErrTooLarge,
		seckill.ErrSoldOut, seckill.ErrLimitExceeded, seckill.ErrNotStarted, seckill.ErrEnded,
		seckill.ErrSalePaused, seckill.ErrNotAdmitted, seckill.ErrUnpaidLimit, seckill.ErrUndecided,
	} {
		if errors.Is(err, a) {
			return true
		}
	}
	return false
}

type tracedCatalog struct {
	t    trace.Tracer
	next Catalog
}

func (c tracedCatalog) Voucher(ctx context.Context, id int64) (seckill.Voucher, error) {
	ctx, s := span(ctx, c.t, "buy catalog")
	v, err := c.next.Voucher(ctx, id)
	done(s, err)
	return v, err
}

type tracedLimit struct {
	t    trace.Tracer
	name string
	next Limit
}

func (l tracedLimit) Take(ctx context.Context, a *Attempt) error {
	ctx, s := span(ctx, l.t, l.name)
	err := l.next.Take(ctx, a)
	done(s, err)
	return err
}

type tracedHoard struct {
	t    trace.Tracer
	next Hoard
}

func (h tracedHoard) Check(ctx context.Context, userID int64) error {
	ctx, s := span(ctx, h.t, "buy unpaid_strikes")
	err := h.next.Check(ctx, userID)
	done(s, err)
	return err
}

type tracedCaptcha struct {
	t    trace.Tracer
	next Captcha
}

func (c tracedCaptcha) Check(ctx context.Context, a *Attempt, known bool) error {
	ctx, s := span(ctx, c.t, "buy "+StepCaptcha)
	err := c.next.Check(ctx, a, known)
	done(s, err)
	return err
}

type tracedBreaker struct {
	t    trace.Tracer
	next Breaker
}

func (b tracedBreaker) Run(ctx context.Context, path string, call func(ctx context.Context) (Purchase, error)) (Purchase, error) {
	ctx, s := span(ctx, b.t, "buy breaker", trace.WithAttributes(attribute.String("seckill.path", path)))
	pur, err := b.next.Run(ctx, path, call)
	done(s, err)
	return pur, err
}

type tracedSeller struct {
	t    trace.Tracer
	next Seller
}

func (t tracedSeller) Sell(ctx context.Context, req seckill.BuyRequest) (Sale, error) {
	ctx, s := span(ctx, t.t, "buy sell", trace.WithAttributes(attribute.String("seckill.path", t.next.Path())))
	sale, err := t.next.Sell(ctx, req)
	if err == nil {
		s.SetAttributes(attribute.Int64("seckill.order_id", sale.OrderID))
	}
	done(s, err)
	return sale, err
}

func (t tracedSeller) RequestKnown(ctx context.Context, voucherID, userID int64, key string) (bool, error) {
	return t.next.RequestKnown(ctx, voucherID, userID, key)
}

func (t tracedSeller) Path() string { return t.next.Path() }
