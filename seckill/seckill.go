// Package seckill is the buying domain: vouchers, the reservation of their
// stock, and the rules that decide whether a shopper may buy. It declares the
// small interfaces it needs (Stock, Queue, OrderIDs) and keeps every driver out:
// the Redis stock is seckill/redisstock, the Kafka queue orders/kafkaq.
package seckill

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Kind is how a voucher is sold.
type Kind string

// The three voucher kinds.
const (
	// KindSeckill is the flash sale: reserved in Redis, persisted through Kafka.
	KindSeckill Kind = "seckill"
	// KindLimit is sold synchronously in PostgreSQL with a per-user limit.
	KindLimit Kind = "limit"
	// KindCommon is sold synchronously in PostgreSQL without a per-user limit.
	KindCommon Kind = "common"
)

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool {
	return k == KindSeckill || k == KindLimit || k == KindCommon
}

// DefaultStateGrace is how long after a sale's end its Redis state lives by
// default: the stock's keys (seckill/redisstock), the waiting room's
// (seckill/waitroom), and so how far back the healer of orders looks for
// vouchers that may still have some. After it PostgreSQL answers alone.
const DefaultStateGrace = time.Hour

// Limits on what an operator may create and a shopper may ask for.
const (
	MaxStock        = 10_000_000
	MaxPerUserLimit = 1_000
	MaxQuantity     = 100
	MaxTitleLen     = 200
	MaxRequestKey   = 64
	MaxPriceCents   = 100_000_000_00
	// MaxShards is the most Redis buckets one voucher's stock may be
	// spread over: enough to use every master of a large cluster, few
	// enough that a sold-out check across them stays cheap.
	MaxShards = 64
	// MaxAdmitPerSecond bounds a waiting room's admission rate; past it a
	// room admits faster than any fleet sells and only adds a step.
	MaxAdmitPerSecond = 100_000
	// MaxPrequeueSeconds bounds how long before a sale its line may open.
	MaxPrequeueSeconds = 7 * 24 * 3600
)

// The challenges a voucher may ask of a buyer (Voucher.Challenge).
const (
	ChallengeNone    = "none"
	ChallengeCaptcha = "captcha"
	ChallengePoW     = "pow"
)

// Challenge names what buying v takes: ChallengeNone, ChallengeCaptcha or
// ChallengePoW.
func (v Voucher) Challenge() string {
	switch {
	case v.ProofOfWork:
		return ChallengePoW
	case v.CaptchaRequired:
		return ChallengeCaptcha
	}
	return ChallengeNone
}

// Voucher is something on sale. StockLeft is the live figure: Redis for
// seckill vouchers, PostgreSQL for the others.
type Voucher struct {
	ID         int64
	Title      string
	Kind       Kind
	PriceCents int64
	// Currency is the ISO 4217 code PriceCents is counted in (its minor
	// unit) and payments are charged in; "" in a record made before
	// vouchers carried one, which the catalog reads as the configured
	// currency.
	Currency        string
	StockTotal      int64
	StockLeft       int64
	PerUserLimit    int64
	BeginAt         time.Time
	EndAt           time.Time
	CaptchaRequired bool
	// ProofOfWork makes buying take a solved proof-of-work challenge (the
	// README's "Challenges"); never together with CaptchaRequired.
	ProofOfWork bool
	CreatedAt   time.Time
	// Paused is the operator's pause of this one voucher (PUT
	// /api/v1/admin/vouchers/{id}/state). PostgreSQL is its record.
	Paused bool
	// GraceSeconds is how long a waiting room holds a turn its shopper
	// missed (seckill/waitroom, "A missed turn is held"); 0 expires it at
	// once. New vouchers get DefaultGraceSeconds unless told otherwise.
	GraceSeconds int64
	// State is what a shopper sees, as the catalog computed it when it
	// last refreshed (see StateAt). Empty on a voucher that did not come
	// from the catalog's memory.
	State State
	// Shards is how many Redis buckets hold a seckill voucher's stock, so
	// one hot voucher can use many Redis nodes. 0 means 1 (see ShardCount).
	Shards int
	// WaitingRoom, when set, makes buying take an admission pass from the
	// voucher's fair line (seckill/waitroom).
	WaitingRoom *WaitingRoom
	// Draw is the public face of a voucher sold by draw (seckill/draw), as
	// the catalog last read it; nil for the others, and before its entries
	// open.
	Draw *DrawFace
	// Entry, when set, says who may join the voucher's line or draw
	// (seckill/eligibility); nil takes every shopper.
	Entry *EntryRule
}

// EntryRule is who may enter a voucher's line or draw: one person, one
// chance (seckill/eligibility).
type EntryRule struct {
	// TokenRequired: only with an entry token the merchant signed, one
	// place per person key.
	TokenRequired bool
	// Allowlist: only the user ids and person keys an operator uploaded.
	Allowlist bool
}

// DrawFace is what anyone may see of a draw: the beacon round it takes its
// outcome from, the hash of its entries once frozen, every commitment it
// showed, the round's signature and the cut-off once drawn (empty before),
// whether it is void, and how many entered. Commitment and Seed are a
// seed-based draw's (before the beacon), empty for the others. It is
// comparable, so the catalog tells a change with ==.
type DrawFace struct {
	Commitment, Seed, Cutoff string
	Entries                  int64
	// Beacon is the round committed to; zero Round before it is.
	Beacon BeaconFace
	// EntriesHash is the hex SHA-256 of the sorted entry ids, each
	// followed by a newline, published when entries freeze.
	EntriesHash string
	// Commitments are every commitment shown, oldest first: the first
	// NCommitments of the array (a draw commits to a beacon and to its
	// entries, once each).
	Commitments  [2]DrawCommitment
	NCommitments int
	// Void is set when the draw's state was lost before it was made; Why
	// says what happened.
	Void bool
	Why  string
}

// BeaconFace is a drand round a draw commits to.
type BeaconFace struct {
	ChainHash string
	Round     uint64
	// RoundAtMs is the round's time, Unix milliseconds.
	RoundAtMs int64
	// Signature is the round's signature in hex, empty until the draw.
	Signature string
}

// DrawCommitment is one commitment a draw showed: a beacon (Beacon) or an
// entries hash (EntriesHash), when it was recorded.
type DrawCommitment struct {
	Kind        string
	Beacon      BeaconFace
	EntriesHash string
	AtMs        int64
}

// WaitingRoom is how a voucher's line admits shoppers.
type WaitingRoom struct {
	// AdmitPerSecond is how many shoppers the whole fleet admits a second
	// from begin_at.
	AdmitPerSecond int64
	// PrequeueSeconds is how long before begin_at shoppers may join; all
	// who join then get a random place at begin_at.
	PrequeueSeconds int64
	// Adaptive, when set, lets the admission rate follow the back end's
	// health between its bounds, starting from AdmitPerSecond
	// (seckill/waitroom, adapt.go).
	Adaptive *Adaptive
	// Mode is RoomLine (the default, also when empty) or RoomDraw: the
	// PrequeueSeconds before begin_at take entries, and at begin_at a
	// verifiable draw ranks them (seckill/draw).
	Mode RoomMode
	// DrawPassSeconds is how long a draw winner's pass lives (0:
	// DefaultDrawPassSeconds).
	DrawPassSeconds int64
	// DrawHold asks each entry of the draw for a card hold of the price
	// times the per-user limit, captured only when its winner buys
	// (orders/payment/README.md, "Holds of a draw").
	DrawHold bool
}

// RoomMode is how a waiting room orders its shoppers.
type RoomMode string

// The modes of a waiting room.
const (
	RoomLine RoomMode = "line"
	RoomDraw RoomMode = "draw"
)

// Bounds of a voucher's grace for a missed turn, in seconds.
const (
	DefaultGraceSeconds = 600
	MaxGraceSeconds     = 3600
)

// Bounds of a draw's pass lifetime, in seconds.
const (
	DefaultDrawPassSeconds = 600
	MaxDrawPassSeconds     = 86_400
)

// IsDraw reports whether w sells by draw.
func (w *WaitingRoom) IsDraw() bool { return w != nil && w.Mode == RoomDraw }

// DrawPass is how long a draw winner's pass lives.
func (w *WaitingRoom) DrawPass() time.Duration {
	if w == nil || w.DrawPassSeconds <= 0 {
		return DefaultDrawPassSeconds * time.Second
	}
	return time.Duration(w.DrawPassSeconds) * time.Second
}

// Adaptive is a waiting room's admission that follows the back end's
// health: the fleet slows the room down while the buy path's p99 is above
// TargetP99Ms (or the workers fall behind, a breaker is open, orders fail)
// and speeds it up again once the back end has room.
type Adaptive struct {
	// TargetP99Ms is the buy path's p99 the rate aims to stay under.
	TargetP99Ms int64
	// MinPerSecond and MaxPerSecond bound the rate.
	MinPerSecond, MaxPerSecond int64
}

// MaxTargetP99Ms bounds an adaptive room's latency target: past a minute a
// buy has long timed out anyway.
const MaxTargetP99Ms = 60_000

// ShardCount is how many buckets hold v's stock: Shards, or 1 when unset.
func (v Voucher) ShardCount() int {
	if v.Shards < 1 {
		return 1
	}
	return v.Shards
}

// State is where a voucher's sale stands for a shopper.
type State string

// The states of a voucher (gateway/openapi.yaml, Voucher.state).
const (
	StateScheduled State = "scheduled"
	StateOnSale    State = "on_sale"
	StatePaused    State = "paused"
	StateSoldOut   State = "sold_out"
	StateEnded     State = "ended"
)

// StateAt is v's state at now by now's clock. An ended sale is ended even
// when paused; a paused one is paused even when sold out, because the pause
// is what the operator must see undone.
func (v Voucher) StateAt(now time.Time) State {
	switch {
	case !now.Before(v.EndAt):
		return StateEnded
	case v.Paused:
		return StatePaused
	case v.StockLeft <= 0:
		return StateSoldOut
	case now.Before(v.BeginAt):
		return StateScheduled
	default:
		return StateOnSale
	}
}

// Years a voucher's window may use (in UTC): JSON and PostgreSQL both carry
// four-digit years, and a sale before 2000 is a typo.
const (
	MinYear = 2000
	MaxYear = 9999
)

// Validate checks what an operator sent before anything is stored. It
// names every bad field (apperr.Fields, JSON pointers into the body of
// POST /api/v1/admin/vouchers), not only the first, so an operator fixes
// them all in one go.
func (v Voucher) Validate() error {
	var f apperr.Fields
	switch {
	case !utf8.ValidString(v.Title):
		f.Addf("/title", "title must be valid UTF-8 text")
	case v.Title == "" || utf8.RuneCountInString(v.Title) > MaxTitleLen:
		// Characters, as the vouchers table's CHECK and the API's schema count.
		f.Addf("/title", "title must be 1 to %d characters", MaxTitleLen)
	case strings.ContainsFunc(v.Title, unicode.IsControl):
		// PostgreSQL refuses NUL outright; the other controls (tab and
		// newline included) have no place in a one-line title shown on a
		// shop page.
		f.Addf("/title", "title must not contain control characters such as tabs or line breaks")
	}
	if !v.Kind.Valid() {
		f.Addf("/kind", "kind must be seckill, limit or common")
	}
	if v.PriceCents < 0 || v.PriceCents > MaxPriceCents {
		f.Addf("/price_cents", "price_cents must be 0 to %d", int64(MaxPriceCents))
	}
	switch {
	case v.Currency != "" && !ValidCurrency(v.Currency):
		f.Addf("/currency", "currency must be an ISO 4217 code in capitals, such as CNY, USD or JPY")
	case CurrencyExponent(v.Currency) == 3 && v.PriceCents%10 != 0:
		// Card networks take three-decimal currencies rounded to ten.
		f.Addf("/price_cents", "price_cents in %s must be a multiple of 10: card payments round its third decimal to zero", v.Currency)
	case v.Currency == "MGA" && v.PriceCents%100 != 0:
		// ISO gives the ariary two decimals nobody pays in; card payments
		// take whole ariary.
		f.Addf("/price_cents", "price_cents in MGA must be a multiple of 100: card payments take whole ariary")
	}
	if v.StockTotal < 1 || v.StockTotal > MaxStock {
		f.Addf("/stock", "stock must be 1 to %d", MaxStock)
	}
	if v.PerUserLimit < 1 || v.PerUserLimit > MaxPerUserLimit {
		f.Addf("/per_user_limit", "per_user_limit must be 1 to %d", MaxPerUserLimit)
	}
	v.validateWindow(&f)
	switch {
	case v.Shards < 0 || v.Shards > MaxShards:
		f.Addf("/shards", "shards must be 1 to %d", MaxShards)
	case v.CaptchaRequired && v.ProofOfWork:
		f.Addf("/challenge", "a voucher takes one challenge: captcha or pow, not both")
	case v.ShardCount() > 1 && v.Kind != KindSeckill:
		// Only a seckill voucher's stock lives in Redis buckets; the
		// others are sold from their PostgreSQL row.
		f.Addf("/shards", "shards above 1 are for seckill vouchers only")
	}
	if v.Entry != nil && (v.Entry.TokenRequired || v.Entry.Allowlist) && v.WaitingRoom == nil {
		// Entries are taken at the join of a line or a draw; a voucher
		// without one is bought directly, with no join to check.
		f.Addf("/entry", "entry is for vouchers with a waiting_room: entries are checked when a shopper joins its line or draw")
	}
	if r := v.WaitingRoom; r != nil {
		r.validate(v.Kind, &f)
	}
	if v.GraceSeconds < 0 || v.GraceSeconds > MaxGraceSeconds {
		f.Addf("/grace_seconds", "grace_seconds must be 0 to %d", MaxGraceSeconds)
	}
	return f.Err()
}

// validateWindow checks begin_at and end_at: each on its own, then their
// order once both are good.
func (v Voucher) validateWindow(f *apperr.Fields) {
	good := true
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"begin_at", v.BeginAt}, {"end_at", v.EndAt}} {
		switch {
		case t.at.IsZero():
			f.Addf("/"+t.field, "%s is required", t.field)
			good = false
		case outOfYears(t.at):
			f.Addf("/"+t.field, "%s must be in the years %d to %d (UTC)", t.field, MinYear, MaxYear)
			good = false
		}
	}
	if good && !v.EndAt.After(v.BeginAt) {
		f.Addf("/end_at", "end_at must be after begin_at")
	}
}

// validate checks a waiting room of a voucher of kind k; every bad field is
// named under /waiting_room.
func (r *WaitingRoom) validate(k Kind, f *apperr.Fields) {
	if k != KindSeckill {
		// The room's admission is bounded by the Redis stock, which
		// only seckill vouchers keep.
		f.Addf("/waiting_room", "waiting_room is for seckill vouchers only")
		return
	}
	if r.AdmitPerSecond < 1 || r.AdmitPerSecond > MaxAdmitPerSecond {
		f.Addf("/waiting_room/admit_per_second", "waiting_room.admit_per_second must be 1 to %d", MaxAdmitPerSecond)
	}
	switch {
	case r.PrequeueSeconds < 0 || r.PrequeueSeconds > MaxPrequeueSeconds:
		f.Addf("/waiting_room/prequeue_seconds", "waiting_room.prequeue_seconds must be 0 to %d", MaxPrequeueSeconds)
	case r.Mode == RoomDraw && r.PrequeueSeconds < 1:
		// The entries are taken in the pre-queue: none would fit in 0 s.
		f.Addf("/waiting_room/prequeue_seconds", "waiting_room.prequeue_seconds must be at least 1 in a draw: entries are taken then")
	}
	if r.Mode != "" && r.Mode != RoomLine && r.Mode != RoomDraw {
		f.Addf("/waiting_room/mode", "waiting_room.mode must be line or draw")
	}
	if r.DrawHold && r.Mode != RoomDraw {
		f.Addf("/waiting_room/draw_hold", "waiting_room.draw_hold needs waiting_room.mode draw: only a draw's entries are held")
	}
	if r.DrawPassSeconds < 0 || r.DrawPassSeconds > MaxDrawPassSeconds {
		f.Addf("/waiting_room/draw_pass_seconds", "waiting_room.draw_pass_seconds must be 0 (the default, 600) to %d", MaxDrawPassSeconds)
	}
	if a := r.Adaptive; a != nil {
		a.validate(r.AdmitPerSecond, f)
	}
}

// validate checks an adaptive room's figures against its starting rate;
// every error names its field.
func (a Adaptive) validate(start int64, f *apperr.Fields) {
	const at = "/waiting_room/adaptive/"
	if a.TargetP99Ms < 1 || a.TargetP99Ms > MaxTargetP99Ms {
		f.Addf(at+"target_p99_ms", "waiting_room.adaptive.target_p99_ms must be 1 to %d", MaxTargetP99Ms)
	}
	minOK := a.MinPerSecond >= 1 && a.MinPerSecond <= MaxAdmitPerSecond
	if !minOK {
		f.Addf(at+"min_per_second", "waiting_room.adaptive.min_per_second must be 1 to %d", MaxAdmitPerSecond)
	}
	switch {
	case a.MaxPerSecond < a.MinPerSecond || a.MaxPerSecond > MaxAdmitPerSecond:
		f.Addf(at+"max_per_second", "waiting_room.adaptive.max_per_second must be min_per_second to %d", MaxAdmitPerSecond)
	case minOK && start >= 1 && start <= MaxAdmitPerSecond && (start < a.MinPerSecond || start > a.MaxPerSecond):
		// Only a starting rate good on its own: one bad field, one entry.
		f.Addf("/waiting_room/admit_per_second", "waiting_room.admit_per_second must be within waiting_room.adaptive's min_per_second and max_per_second")
	}
}

func outOfYears(t time.Time) bool {
	y := t.UTC().Year()
	return y < MinYear || y > MaxYear
}

// Reservation is stock held for one shopper: what the gateway puts on the
// queue and the workers turn into an order.
type Reservation struct {
	OrderID    int64     `json:"order_id,string"`
	VoucherID  int64     `json:"voucher_id,string"`
	UserID     int64     `json:"user_id,string"`
	Quantity   int64     `json:"quantity"`
	RequestKey string    `json:"request_key,omitempty"`
	ReservedAt time.Time `json:"reserved_at"`
}

// Validate checks a reservation before a store takes it: the gateway's buy,
// the stock's script and the record's insert all refuse with these rules, so
// a reservation one of them accepts, the others accept too.
func (r Reservation) Validate() error {
	if r.OrderID <= 0 {
		return apperr.Invalidf("bad order id")
	}
	return r.validateRequest()
}

// validateRequest checks the fields a shopper's request fills in.
// Every bad field is named (apperr.Fields); the good request, the buy's
// common case, allocates nothing.
func (r Reservation) validateRequest() error {
	if r.VoucherID > 0 && r.UserID > 0 && r.Quantity >= 1 && r.Quantity <= MaxQuantity && len(r.RequestKey) <= MaxRequestKey {
		return nil
	}
	if r.UserID <= 0 {
		// The token's, not a field the caller sent.
		return apperr.Invalidf("bad user id")
	}
	var f apperr.Fields
	if r.VoucherID <= 0 {
		f.Addf("id", "bad voucher id")
	}
	if r.Quantity < 1 || r.Quantity > MaxQuantity {
		f.Addf("/quantity", "quantity must be 1 to %d", MaxQuantity)
	}
	if len(r.RequestKey) > MaxRequestKey {
		f.Addf("Idempotency-Key", "Idempotency-Key is longer than %d characters", MaxRequestKey)
	}
	return f.Err()
}

// ReserveResult is what the stock said to a reservation.
type ReserveResult struct {
	// OrderID is the reservation's order: the new one, or on a replay of a
	// known request key the first one.
	OrderID int64
	// Replayed is true when the request key was seen before and nothing new
	// was held.
	Replayed bool
	// StockLeft is what was left after this reservation (or at the replay).
	StockLeft int64
}

// ReleaseMode says which reservations a release may undo.
type ReleaseMode int

const (
	// ReleaseAny undoes a held or persisted reservation (cancel, timeout,
	// failure). The request key keeps pointing at the order, so a replay
	// returns the same, now final, order.
	ReleaseAny ReleaseMode = iota
	// ReleaseUnsent undoes a reservation whose message never reached the
	// queue, and forgets its request key: the attempt left no trace, so a
	// retry is a new attempt.
	ReleaseUnsent
	// ReleaseIfPending undoes a reservation only while no worker has
	// confirmed it (the reconciler's release).
	ReleaseIfPending
	// ReleaseRefused ends a reservation the record refused for want of
	// stock without giving its stock back: the record had no unit for it,
	// so the store held one too many (it lost writes it had acknowledged,
	// as a promoted Redis replica does), and on sale again that unit would
	// only be sold and refused again. The unit leaves the store's total
	// instead; the healer's drift check then sees the totals differ and
	// rebuilds the store from the record.
	ReleaseRefused
)

// Stock is the fast gate: the atomic reservation and its release.
type Stock interface {
	// Reserve holds r.Quantity of r.VoucherID for r.UserID under r.OrderID,
	// checking the sale window with the store's own clock, the stock and the
	// per-user limit in one atomic step. It returns ErrSoldOut,
	// ErrLimitExceeded, ErrNotStarted, ErrEnded, ErrStockMissing (the store
	// has no state for the voucher: never warmed, lost, or being rebuilt)
	// or, for a replay of a keyed hold not promised yet, ErrUndecided. A
	// keyed hold it makes is undecided until Promise or Release.
	Reserve(ctx context.Context, r Reservation) (ReserveResult, error)
	// Release gives a reservation's stock back, at most once per order. It
	// reports whether this call released it.
	Release(ctx context.Context, voucherID, orderID int64, mode ReleaseMode) (bool, error)
	// Promise records that r's order stands (its message is written, or
	// it is persisted): from then on a replay of r's request key may be
	// answered with it. Until then Reserve refuses such a replay with
	// ErrUndecided; only Promise, a Release or a worker's confirm (the
	// order persisted) decides it.
	Promise(ctx context.Context, r Reservation) error
}

// Queue carries accepted reservations to the workers.
type Queue interface {
	// Publish returns nil once the message is durably written. An error
	// wraps ErrNotQueued when the message certainly was not written.
	Publish(ctx context.Context, r Reservation) error
}

// OrderIDs hands out unique, time-ordered order ids.
type OrderIDs interface {
	Next() int64
}
