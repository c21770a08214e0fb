package orders

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/flashsale/seckill/orders/payment"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
	"github.com/flashsale/seckill/seckill/draw"
)

// HoldState is where a draw entrant's card hold is (migration 016).
type HoldState string

// The states of a hold: held until the draw decides, then captured as a
// winner's order's payment or released. Capturing and releasing are the
// claims of whoever asks the provider.
const (
	HoldHeld      HoldState = "held"
	HoldCapturing HoldState = "capturing"
	HoldCaptured  HoldState = "captured"
	HoldReleasing HoldState = "releasing"
	HoldReleased  HoldState = "released"
)

// Hold is money a draw entrant's card holds for the draw (orders/payment
// README, "Holds of a draw").
type Hold struct {
	VoucherID int64
	UserID    int64
	// PaymentID is the provider's id of the held payment (a PaymentIntent
	// with capture_method=manual).
	PaymentID   string
	Provider    string
	AmountCents int64
	Currency    string
	// ClientSecret lets the shopper's page confirm the hold with the
	// provider.
	ClientSecret string
	State        HoldState
	// OrderID is the order the hold pays, once its capture is claimed.
	OrderID int64
}

// HoldRecord is the record of holds in PostgreSQL (orders/pgstore.Store
// implements it). Every claim is a conditional update: exactly one caller
// fleet-wide gets a hold, and a claim older than a minute is given to the
// next caller, who asks the provider again with the same idempotency key.
type HoldRecord interface {
	// InsertHold records h as held unless the user holds one for the
	// voucher already (created false: that one is returned).
	InsertHold(ctx context.Context, h Hold) (_ Hold, created bool, _ error)
	// HoldOf is the user's hold for the voucher; apperr.ErrNotFound when
	// none.
	HoldOf(ctx context.Context, voucherID, userID int64) (Hold, error)
	// ClaimCapture claims the user's held hold for order o (ok false when
	// it is not held, or claimed by someone else).
	ClaimCapture(ctx context.Context, o Order) (_ Hold, ok bool, _ error)
	// Captured records the claimed hold as o's payment, succeeded: the
	// order is paid if still created, else the money is owed back (the
	// refund outbox of payments).
	Captured(ctx context.Context, h Hold, o Order) (Order, error)
	// ClaimRelease claims up to max holds of the voucher that are held,
	// except the users of keep.
	ClaimRelease(ctx context.Context, voucherID int64, keep []int64, max int) ([]Hold, error)
	// Released records that the provider let the hold go.
	Released(ctx context.Context, h Hold) error
	// Order is order id, or an error wrapping apperr.ErrNotFound.
	Order(ctx context.Context, id int64) (Order, error)
	// HeldOrders are up to max created orders whose buyer holds a held
	// hold for the order's voucher: the captures a settle makes.
	HeldOrders(ctx context.Context, max int) ([]Order, error)
	// HoldDraws are the vouchers with holds to settle, with their draws.
	HoldDraws(ctx context.Context) ([]HoldDraw, error)
	// HoldEntries are the recorded draw entries of the voucher's users
	// whose hold is not settled yet: only those a settle decides.
	HoldEntries(ctx context.Context, voucherID int64) ([]draw.Entry, error)
}

// HoldDraw is a voucher with holds to settle: its sale's end, its
// winners' pass and its draw as recorded.
type HoldDraw struct {
	VoucherID int64
	EndAt     time.Time
	DrawPass  time.Duration
	// Void, Signature (hex), Cutoff and DrawnAt are the draw's record
	// (empty and zero before the draw).
	Void      string
	Signature string
	Cutoff    string
	DrawnAt   time.Time
}

// Holds authorises a draw entrant's payment at entry and settles it after
// the draw: captured as a winner's order's payment, released for everyone
// else. Without an Authorizer (the demo provider) no hold is made.
type Holds struct {
	record   HoldRecord
	auth     payment.Authorizer
	provider string
	currency string
	log      *slog.Logger
}

// HoldsConfig is what NewHolds builds Holds from.
type HoldsConfig struct {
	Record HoldRecord
	// Authorizer holds the money; Provider is its name in the API.
	Authorizer payment.Authorizer
	Provider   string
	// Currency is SECKILL_CURRENCY (DefaultCurrency when empty).
	Currency string
	Log      *slog.Logger
}

// NewHolds returns the draw's holds.
func NewHolds(cfg HoldsConfig) *Holds {
	if cfg.Currency == "" {
		cfg.Currency = DefaultCurrency
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Holds{record: cfg.Record, auth: cfg.Authorizer, provider: cfg.Provider,
		currency: payment.NormalizeCurrency(cfg.Currency), log: cfg.Log}
}

// HoldAmount is what an entry holds: the voucher's price times its
// per-user limit, the most its winner may buy.
func HoldAmount(v seckill.Voucher) int64 { return v.PriceCents * max(v.PerUserLimit, 1) }

// Enter holds HoldAmount(v) of the user's card for v's draw, or returns the
// hold they have (an entrant entering again). The provider's create
// carries a key of the voucher and user, so a retry after a lost answer
// gets the same payment back.
func (h *Holds) Enter(ctx context.Context, v seckill.Voucher, userID int64) (Hold, error) {
	if got, err := h.record.HoldOf(ctx, v.ID, userID); err == nil {
		return got, nil
	} else if !errors.Is(err, apperr.ErrNotFound) {
		return Hold{}, fmt.Errorf("orders: hold: %w", err)
	}
	amount := HoldAmount(v)
	currency := payment.NormalizeCurrency(v.CurrencyOr(h.currency))
	in, err := h.auth.Authorize(ctx, payment.CreateRequest{AmountCents: amount, Currency: currency,
		IdempotencyKey: "seckill-hold-" + strconv.FormatInt(v.ID, 10) + "-" + strconv.FormatInt(userID, 10)})
	if err != nil {
		return Hold{}, fmt.Errorf("orders: hold: %w: %w", apperr.ErrUnavailable, err)
	}
	got, _, err := h.record.InsertHold(ctx, Hold{VoucherID: v.ID, UserID: userID, PaymentID: in.ID, Provider: h.provider,
		AmountCents: amount, Currency: currency, ClientSecret: in.ClientSecret, State: HoldHeld})
	if err != nil {
		return Hold{}, fmt.Errorf("orders: hold: %w", err)
	}
	return got, nil
}

// Capture takes the order's amount from its buyer's hold for the order's
// voucher, once fleet-wide, and returns the order paid. ok is false when
// the buyer has no held hold for it (none, or another process settles it).
func (h *Holds) Capture(ctx context.Context, o Order) (_ Order, ok bool, _ error) {
	hold, ok, err := h.record.ClaimCapture(ctx, o)
	if err != nil || !ok {
		return o, false, err
	}
	if o.AmountCents > hold.AmountCents {
		return o, false, fmt.Errorf("orders: capture hold %s: order %d costs %d, over the %d held", hold.PaymentID, o.ID, o.AmountCents, hold.AmountCents)
	}
	if _, err := h.auth.Capture(ctx, hold.PaymentID, o.AmountCents, hold.Currency, "seckill-capture-"+hold.PaymentID); err != nil {
		// The claim stays: a later call takes it over with the same key.
		return o, false, fmt.Errorf("orders: capture hold %s: %w", hold.PaymentID, err)
	}
	paid, err := h.record.Captured(ctx, hold, o)
	if err != nil {
		return o, false, fmt.Errorf("orders: capture hold %s: %w", hold.PaymentID, err)
	}
	return paid, true, nil
}

// CaptureOrder is Capture of the user's order id, asked by the shopper's
// page for its payment: the captured payment, or ok false when the order
// has no held hold to take (the page then pays as for any order).
func (h *Holds) CaptureOrder(ctx context.Context, userID, orderID int64) (_ Payment, ok bool, _ error) {
	o, err := h.record.Order(ctx, orderID)
	if errors.Is(err, apperr.ErrNotFound) {
		// Not in PostgreSQL yet (still a reservation): nothing to capture
		// for; the payment route says what it says of such an order.
		return Payment{}, false, nil
	}
	if err != nil || o.UserID != userID {
		return Payment{}, false, err
	}
	paid, ok, err := h.Capture(ctx, o)
	if err != nil || !ok || paid.Payment == nil {
		return Payment{}, false, err
	}
	return *paid.Payment, true, nil
}

// Release lets go up to max held holds of the voucher, except those of the
// users in keep (the winners whose pass still stands), and returns how many
// the provider let go. After the draw keep is its winners; once their
// passes expired or the sale ended, nil.
func (h *Holds) Release(ctx context.Context, voucherID int64, keep []int64, max int) (int, error) {
	list, err := h.record.ClaimRelease(ctx, voucherID, keep, max)
	if err != nil {
		return 0, fmt.Errorf("orders: release holds of voucher %d: %w", voucherID, err)
	}
	n := 0
	var first error
	for _, hold := range list {
		if err := h.auth.Release(ctx, hold.PaymentID, "seckill-release-"+hold.PaymentID); err != nil {
			if first == nil {
				first = fmt.Errorf("orders: release hold %s: %w", hold.PaymentID, err)
			}
			continue
		}
		if err := h.record.Released(ctx, hold); err != nil {
			if first == nil {
				first = fmt.Errorf("orders: release hold %s: %w", hold.PaymentID, err)
			}
			continue
		}
		n++
	}
	return n, first
}

// Settle captures up to max held holds whose buyer has a created order of
// the voucher (the shopper's page need not ask), then releases, up to max
// per voucher, the holds nobody will buy with,
// as of now: after the draw every loser's; once the winners' passes
// expired (draw_pass_seconds after the draw), the sale ended or the draw
// is void, every hold not yet captured. A hold whose user has a created
// order of the voucher is kept for its capture (ClaimRelease). It returns
// how many the provider let go.
func (h *Holds) Settle(ctx context.Context, now time.Time, max int) (int, error) {
	due, err := h.record.HeldOrders(ctx, max)
	if err != nil {
		return 0, fmt.Errorf("orders: settle holds: %w", err)
	}
	for _, o := range due {
		if _, _, err := h.Capture(ctx, o); err != nil {
			h.log.WarnContext(ctx, "hold not captured; the next sweep tries again", "order_id", o.ID, "err", err)
		}
	}
	list, err := h.record.HoldDraws(ctx)
	if err != nil {
		return 0, fmt.Errorf("orders: settle holds: %w", err)
	}
	total := 0
	var first error
	for _, d := range list {
		keep, ok, err := h.keepOf(ctx, d, now)
		if err == nil && ok {
			var n int
			n, err = h.Release(ctx, d.VoucherID, keep, max)
			total += n
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return total, first
}

// keepOf is whose holds of d stand as of now (ok false: not drawn yet,
// every hold stands).
func (h *Holds) keepOf(ctx context.Context, d HoldDraw, now time.Time) (keep []int64, ok bool, _ error) {
	switch {
	case d.Void != "" || !now.Before(d.EndAt):
		return nil, true, nil
	case d.Signature == "" || d.DrawnAt.IsZero():
		return nil, false, nil
	case !now.Before(d.DrawnAt.Add(d.DrawPass)):
		return nil, true, nil
	}
	sig, err := hex.DecodeString(d.Signature)
	if err != nil {
		return nil, false, fmt.Errorf("orders: settle holds of voucher %d: signature: %w", d.VoucherID, err)
	}
	entries, err := h.record.HoldEntries(ctx, d.VoucherID)
	if err != nil {
		return nil, false, fmt.Errorf("orders: settle holds of voucher %d: %w", d.VoucherID, err)
	}
	r := draw.RandomnessOf(sig)
	keep = []int64{}
	for _, e := range entries {
		// Hex tickets compare as their bytes: at or before the cut-off won.
		if draw.TicketOf(r, d.VoucherID, e.EntryID).String() <= d.Cutoff {
			keep = append(keep, e.UserID)
		}
	}
	return keep, true, nil
}
