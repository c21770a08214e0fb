package gateway

import (
	"context"
	"io"
	"time"

	"github.com/flashsale/seckill/gateway/auth"
	"github.com/flashsale/seckill/orders"
	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/api"
)

// The gateway's dependencies are the small interfaces below, declared here
// where they are used; cmd wires the real implementations. Every error they
// return should wrap a kind of seckill/apperr or a refusal of seckill: the
// gateway maps those to HTTP, and answers anything else with 500 internal.

// Catalog is the list of vouchers, kept in memory (seckill.Catalog
// implements it): the catalog routes and the buying path's first gate read
// it without a database query per request.
type Catalog interface {
	// Create validates and stores a voucher and puts it on sale, with act
	// in the operators' trail (the new voucher its target).
	Create(ctx context.Context, v seckill.Voucher, act *seckill.Action) (seckill.Voucher, error)
	// SetState pauses a voucher (seckill.StatePaused) or ends its pause
	// (seckill.StateOnSale) for the whole fleet, with act in the trail, and
	// returns it.
	SetState(ctx context.Context, id int64, st seckill.State, act *seckill.Action) (seckill.Voucher, error)
	// Change steers a running sale (seckill.Change) for the whole fleet,
	// with act in the trail and inTx (when not nil) run inside the change's
	// transaction with the voucher changed, and returns the voucher. A used
	// Idempotency-Key is seckill.ErrKeyUsed, and nothing changes.
	Change(ctx context.Context, id int64, change seckill.Change, act *seckill.Action,
		inTx func(ctx context.Context, after seckill.Voucher) error) (seckill.Voucher, error)
	// Changes lists the changes made to a voucher's running sale, oldest
	// first, from the record.
	Changes(ctx context.Context, id int64) ([]seckill.ChangeRecord, error)
	// Snapshot returns every voucher with its live stock and state, from
	// memory.
	Snapshot(ctx context.Context) (*seckill.CatalogSnapshot, error)
	// Voucher returns one voucher from memory; an id it does not know is
	// looked up once for every caller (a voucher created a moment ago on
	// another instance), else apperr.ErrNotFound.
	Voucher(ctx context.Context, id int64) (seckill.Voucher, error)
}

// OrderReader reads a shopper's orders, including those still only reserved
// in Redis (the contract: a client never sees 404 for an order id it was given).
type OrderReader interface {
	// Get returns the order, or apperr.ErrNotFound when it does not exist
	// or belongs to someone else.
	Get(ctx context.Context, userID, orderID int64) (orders.Order, error)
	// List returns the user's orders, newest first.
	List(ctx context.Context, userID int64) ([]orders.Order, error)
	// Page returns one page of the user's orders, newest first, and
	// whether more follow it.
	Page(ctx context.Context, userID int64, p orders.Page) ([]orders.Order, bool, error)
}

// StatsReader reports one voucher's sales for operators.
type StatsReader interface {
	// Stats returns the voucher's figures, or apperr.ErrNotFound. The
	// answer's Orders[orders.StatusReserved] is the count of live holds not
	// yet persisted (a Redis figure), and StockLeft is the live stock.
	Stats(ctx context.Context, voucherID int64) (orders.Stats, error)
}

// SaleRecorder counts each buy attempt of a known voucher by its answer,
// for the sale report (salereport.Recorder implements it). It is on the
// buying path: it must not block nor do I/O.
type SaleRecorder interface {
	// Attempt counts one attempt: code is the error code it was answered
	// with ("" when accepted), limiter the step whose limit refused it.
	Attempt(voucherID int64, code, limiter string)
	// Replayed counts one attempt answered with the order an earlier
	// attempt's Idempotency-Key made: no new order, so not an accepted one.
	Replayed(voucherID int64)
}

// SaleReports answers the operator's sale report and order export
// (salereport.Reports implements it).
type SaleReports interface {
	// Report returns the voucher's report, or apperr.ErrNotFound.
	Report(ctx context.Context, voucherID int64) (api.SaleReport, error)
	// WriteOrdersCSV writes the voucher's orders to w as CSV, as it reads
	// them.
	WriteOrdersCSV(ctx context.Context, voucherID int64, w io.Writer) error
}

// Accounts registers shoppers and logs them in (auth.Accounts implements it).
type Accounts interface {
	Register(ctx context.Context, username, password string) (auth.User, error)
	Login(ctx context.Context, username, password string) (token string, userID int64, expiresAt time.Time, err error)
}

// TokenVerifier checks a bearer token and names its user (auth.Tokens
// implements it). Errors wrap apperr.ErrUnauthenticated.
type TokenVerifier interface {
	Verify(token string) (userID int64, err error)
}

// Captchas issues captchas for GET /api/v1/captcha; the buy's Captcha step
// checks them, and so does a login past its username's budget of failures
// (edge.Captchas implements it).
type Captchas interface {
	// New returns a fresh captcha's id and its image as a
	// data:image/png;base64 URL.
	New(ctx context.Context) (id, image string, err error)
	// Check judges an answer and spends the captcha whatever the verdict:
	// a missing, wrong, expired or used one is apperr.ErrCaptchaInvalid.
	Check(ctx context.Context, id, answer string) error
}

// AudioCaptchas is what Captchas add for GET /api/v1/captcha?kind=audio
// (edge.Captchas implements it): the same captchas, spoken.
type AudioCaptchas interface {
	// NewAudio returns a fresh captcha's id and its sound as a
	// data:audio/wav;base64 URL; Check judges its answer.
	NewAudio(ctx context.Context) (id, audio string, err error)
}

// Challenges issues proof-of-work challenges for GET /api/v1/challenges
// (edge.Challenges implements it; the buy's Challenge step spends them).
type Challenges interface {
	// Issue makes a challenge for the voucher, asked from the client
	// address clientKey (the difficulty follows both's recent load).
	Issue(ctx context.Context, voucherID int64, clientKey string) (api.Challenge, error)
	// IssueRegister makes a challenge for registering an account.
	IssueRegister(ctx context.Context, clientKey string) (api.Challenge, error)
	// SpendRegister judges a registration's answer and spends the
	// challenge, right or wrong: apperr.ErrChallengeInvalid when missing,
	// wrong, expired, used or not a registration's.
	SpendRegister(ctx context.Context, id, answer string) error
}

// BreakerAdmin is the fleet-wide ops switch of the circuit breaker behind
// GET/PUT /api/v1/admin/breaker (edge.Breaker implements it).
type BreakerAdmin interface {
	// Status returns the mode (auto, open, closed) as this instance last
	// read it, and what this instance's breaker is doing.
	Status() (mode, state string)
	// Switch stores the mode for every instance; an unknown mode is
	// apperr.ErrInvalidInput.
	Switch(ctx context.Context, mode string) error
}

// BreakerPaths is what a BreakerAdmin with one breaker per dependency path
// adds to GET /api/v1/admin/breaker (edge.Breaker implements it).
type BreakerPaths interface {
	// Paths is each path's state, by path name.
	Paths() map[string]string
}

// Check is one dependency /readyz asks about.
type Check struct {
	// Name appears in the readiness answer ("redis", "postgres", "kafka").
	Name string
	// Ping returns nil when the dependency answers.
	Ping func(ctx context.Context) error
}
