package api

import "time"

// BuyRequest is the body of POST /api/v1/vouchers/{id}/orders (the
// `BuyRequest` object). A missing quantity is 1.
type BuyRequest struct {
	Quantity      *int64 `json:"quantity"`
	CaptchaID     string `json:"captcha_id"`
	CaptchaAnswer string `json:"captcha_answer"`
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
}
