package api

import "time"

// BuyRequest is the body of POST /api/v1/vouchers/{id}/orders (the
// `BuyRequest` object). A missing quantity is 1.
type BuyRequest struct {
	Quantity      *int64 `json:"quantity"`
	CaptchaID     string `json:"captcha_id"`
	CaptchaAnswer string `json:"captcha_answer"`
	// ChallengeID and ChallengeAnswer are a solved proof of work (GET
	// /api/v1/challenges), for a voucher whose challenge is pow.
	ChallengeID     string `json:"challenge_id"`
	ChallengeAnswer string `json:"challenge_answer"`
}

// Purchase is the answer to an accepted buy (the `Purchase` object).
type Purchase struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
}

// Order is one of a shopper's orders (the `Order` object), read through
// GET /api/v1/orders and pushed in order frames.
type Order struct {
	OrderID     string    `json:"order_id"`
	VoucherID   string    `json:"voucher_id"`
	UserID      string    `json:"user_id"`
	Quantity    int64     `json:"quantity"`
	AmountCents int64     `json:"amount_cents"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	// PayDeadline is null while the order is only reserved: the deadline is
	// set when the order is persisted.
	PayDeadline *time.Time `json:"pay_deadline"`
	// Payment is the order's current payment through a provider, null
	// before one is asked for.
	Payment *OrderPayment `json:"payment"`
}

// OrderPayment is an order's payment as the order shows it (the
// `OrderPayment` object).
type OrderPayment struct {
	PaymentID   string `json:"payment_id"`
	Provider    string `json:"provider"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// Payment is the answer to POST /api/v1/orders/{id}/payments (the
// `Payment` object): what the shopper's page needs to pay with the
// provider.
type Payment struct {
	PaymentID    string `json:"payment_id"`
	OrderID      string `json:"order_id"`
	Provider     string `json:"provider"`
	AmountCents  int64  `json:"amount_cents"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ClientSecret string `json:"client_secret"`
}

// WebhookAnswer is the answer to a provider's webhook delivery that was
// taken (the `WebhookAnswer` object): result says what it did (applied,
// duplicate, stale, ignored, late_refund).
type WebhookAnswer struct {
	Received bool   `json:"received"`
	Result   string `json:"result"`
}
