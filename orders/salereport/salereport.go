// Package salereport keeps, for every voucher, what its sale did second by
// second (buy attempts, their answers, the waiting line, payments,
// timeouts, units returned) and answers the operator's sale report from it.
//
// The buying path only bumps counters in memory (Recorder); a background
// loop adds them to PostgreSQL in one statement a second, so that the record
// outlives the sale's Redis state and never slows a buy. Every process of
// the fleet adds its own counts to the same rows: the report is the fleet's.
package salereport

import (
	"context"
	"time"
)

// The names of the recorded figures. A refusal is also recorded as
// prefixRefused plus its error code, and a rate-limited one as
// prefixLimiter plus the limit's step.
const (
	figAttempts = "attempts"
	figAccepted = "accepted"
	figReplayed = "replayed"
	figWaiting  = "waiting"
	figAdmitted = "admitted"
	figPaid     = "paid"
	figTimedOut = "timed_out"
	figReturned = "returned"

	prefixRefused = "refused:"
	prefixLimiter = "limiter:"
)

// Count is one figure of one voucher in one second, or in Width seconds
// from it once the retention rolled it up.
type Count struct {
	VoucherID int64
	// Second is the whole second, in UTC.
	Second time.Time
	Name   string
	N      int64
	// Width is how many seconds from Second the count covers: 1 as
	// recorded (also when zero), RollUpWidth once rolled up. Only read
	// counts carry it: a Recorder writes per second.
	Width int64
}

// Figure is one figure of one voucher summed over all its recorded
// seconds.
type Figure struct {
	Name string
	// N is the sum of its counts.
	N int64
	// First and Last are the first and the last second it was recorded in.
	First, Last time.Time
	// Width is the widest of its counts (Count.Width).
	Width int64
}

// OrderFigures are a voucher's orders as PostgreSQL holds them.
type OrderFigures struct {
	StockTotal int64
	// Bought is the orders made (every status but failed), Paid those
	// paid.
	Bought, Paid int64
	// UnitsHeld is the units every order ever held, the failed included.
	UnitsHeld int64
	// Payments counts the payments whose money came through the provider
	// (succeeded, and those refunded since); Refunds the orders refunded;
	// LatePayments the payments that came after their order was cancelled
	// and were refunded automatically.
	Payments, Refunds, LatePayments int64
	// SoldOutAt is the reservation time of the order that took the
	// stock_total-th unit (orders in reservation order, failed ones left
	// out); nil when the orders never added up to the stock.
	SoldOutAt *time.Time
}

// OrderRow is one order of the export.
type OrderRow struct {
	ID, UserID, Quantity int64
	Status               string
	ReservedAt           time.Time
	// PaidAt is set for a paid order.
	PaidAt *time.Time
}

// Store is the report's record in PostgreSQL (orders/pgstore implements
// it). Unknown vouchers are apperr.ErrNotFound.
type Store interface {
	// AddSaleCounts adds sums to the recorded figures and raises gauges
	// to at least theirs, in one transaction.
	AddSaleCounts(ctx context.Context, sums, gauges []Count) error
	// SaleCounts reads the voucher's recorded figures in one snapshot:
	// it passes sums the sum of each figure, then each every count in
	// second order (by name within a second), reading them as it goes so
	// that no span of seconds sits in memory whole. An error of either
	// stops it and is returned.
	SaleCounts(ctx context.Context, voucherID int64, sums func([]Figure) error, each func(Count) error) error
	// SaleCountsToRollUp lists up to limit vouchers whose sale ended
	// before the time before and that have per-second counts from before
	// it.
	SaleCountsToRollUp(ctx context.Context, before time.Time, limit int) ([]int64, error)
	// RollUpSaleCounts sums the voucher's oldest limit per-second counts
	// from before the time before into counts of width seconds, each
	// starting on a multiple of width since the epoch (of a gauge named in
	// gauges, the highest), in one transaction, and says how many
	// per-second counts it rolled up.
	RollUpSaleCounts(ctx context.Context, voucherID int64, before time.Time, width int64, gauges []string, limit int) (int64, error)
	// SaleOrders sums the voucher's orders.
	SaleOrders(ctx context.Context, voucherID int64) (OrderFigures, error)
	// EachSaleOrder calls fn for each of the voucher's orders in id order,
	// reading them as it goes; an error of fn stops it and is returned.
	EachSaleOrder(ctx context.Context, voucherID int64, fn func(OrderRow) error) error
}
