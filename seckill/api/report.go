package api

import "time"

// SaleReport is one voucher's sale as the fleet recorded it, for the
// operator (the `SaleReport` object of GET
// /api/v1/admin/vouchers/{id}/report). Counts are of buy attempts unless a
// field says units.
type SaleReport struct {
	VoucherID string `json:"voucher_id"`
	// FirstBuyAt is the second of the first buy attempt (its hour's start
	// once the counts are rolled up); null before any.
	FirstBuyAt *time.Time `json:"first_buy_at"`
	// SoldOutAt is when the last unit of the stock was first held; null
	// while some was never taken.
	SoldOutAt *time.Time `json:"sold_out_at"`
	Attempts  int64      `json:"attempts"`
	// Accepted is the attempts answered with a new order; Replayed those
	// answered with the order an earlier attempt's Idempotency-Key made,
	// which made none.
	Accepted int64 `json:"accepted"`
	Replayed int64 `json:"replayed"`
	// Refusals counts the refused attempts by error code.
	Refusals map[string]int64 `json:"refusals"`
	// Limiters splits refusals["rate_limited"] by the limit that refused:
	// address_limit, user_limit or global_limit.
	Limiters map[string]int64 `json:"limiters"`
	// BotsRefused is the attempts that a gate against automation refused:
	// the limits (429), the captcha (400 captcha_invalid), the proof of work
	// (400 challenge_invalid) and the waiting room's pass (403 not_admitted).
	BotsRefused int64 `json:"bots_refused"`
	// Admitted is how many shoppers the waiting room let in.
	Admitted int64 `json:"admitted"`
	// Bought is the orders made (every order but the failed), Paid those
	// paid, and Conversion Paid / Bought (0 without orders).
	Bought     int64   `json:"bought"`
	Paid       int64   `json:"paid"`
	Conversion float64 `json:"conversion"`
	// Payments is the payments whose money came through the provider
	// (refunded ones included), Refunds the orders refunded (by an
	// operator, or because their money came late), and LatePayments the
	// payments that came after their order was cancelled, refunded
	// automatically.
	Payments     int64 `json:"payments"`
	Refunds      int64 `json:"refunds"`
	LatePayments int64 `json:"late_payments"`
	// TimedOut is the orders the payment timeout cancelled.
	TimedOut int64 `json:"timed_out"`
	// Returned is the units that came back on sale (timeouts, cancels,
	// failed orders); Resold those of them that were sold again.
	Returned int64 `json:"returned"`
	Resold   int64 `json:"resold"`
	// TimeInLine is the wait from joining the line (or the opening, for
	// the pre-queue) to admission, at one second's resolution (an hour's
	// once the counts are rolled up).
	TimeInLine Percentiles `json:"time_in_line_ms"`
	// BucketSeconds is the width of each timeline element: 1 while the
	// figures span at most 3600 seconds, then the narrowest of 10, 60,
	// 600, 3600, 21600, 86400 and 604800 (ten times wider each step after)
	// that keeps the timeline within 3600 elements, and at least 3600 once
	// the counts are rolled up to the hour, a retention after the sale.
	BucketSeconds int64 `json:"bucket_seconds"`
	// Timeline is one element a bucket of BucketSeconds, from the first
	// recorded bucket to the last, without gaps: at most 3600 whatever the
	// span of the figures.
	Timeline []SaleSecond `json:"timeline"`
}

// Percentiles are a distribution's p50 and p99 (SaleReport.time_in_line_ms),
// null without any sample.
type Percentiles struct {
	P50 *int64 `json:"p50"`
	P99 *int64 `json:"p99"`
}

// SaleSecond is one bucket of a sale's timeline (SaleReport.timeline),
// SaleReport.BucketSeconds wide: a second for a sale of up to an hour, as
// its name says; its counts are the bucket's.
type SaleSecond struct {
	// T is the bucket's start.
	T        time.Time        `json:"t"`
	Attempts int64            `json:"attempts"`
	Accepted int64            `json:"accepted"`
	Replayed int64            `json:"replayed"`
	Refusals map[string]int64 `json:"refusals"`
	// Waiting is the line's length at its longest in the bucket.
	Waiting  int64 `json:"waiting"`
	Admitted int64 `json:"admitted"`
	Paid     int64 `json:"paid"`
	TimedOut int64 `json:"timed_out"`
	Returned int64 `json:"returned"`
}
