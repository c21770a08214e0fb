package api

import "time"

// Voucher is something on sale (the `Voucher` object), in the catalog, in
// an operator's answers and in voucher frames.
type Voucher struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Kind       string `json:"kind"`
	PriceCents int64  `json:"price_cents"`
	// Currency is the ISO 4217 code price_cents is counted in (its minor
	// unit: yen for JPY) and payments are charged in.
	Currency        string    `json:"currency"`
	StockTotal      int64     `json:"stock_total"`
	StockLeft       int64     `json:"stock_left"`
	PerUserLimit    int64     `json:"per_user_limit"`
	BeginAt         time.Time `json:"begin_at"`
	EndAt           time.Time `json:"end_at"`
	CaptchaRequired bool      `json:"captcha_required"`
	// Challenge is what buying takes: none, captcha (the same as
	// captcha_required) or pow.
	Challenge string `json:"challenge"`
	// State is where the sale stands (scheduled, on_sale, paused, sold_out,
	// ended), as of the catalog's last refresh.
	State string `json:"state"`
	// Shards is how many Redis buckets hold the stock (1 for most).
	Shards int `json:"shards"`
	// WaitingRoom is the voucher's line, null when buying needs no pass.
	WaitingRoom *WaitingRoom `json:"waiting_room"`
	// Draw is the voucher's draw, null unless it sells by draw.
	Draw *Draw `json:"draw"`
	// Entry is who may join the voucher's line or draw, null when every
	// shopper may.
	Entry *Entry `json:"entry"`
	// GraceSeconds is how long a waiting room holds a turn its shopper
	// missed (0: a missed pass expires at once).
	GraceSeconds int64 `json:"grace_seconds"`
}

// Entry is who may enter a voucher's line or draw (the `Entry` object):
// only with the merchant's entry token (the header Seckill-Entry-Token),
// only from the operator's allowlist, or both.
type Entry struct {
	TokenRequired bool `json:"token_required"`
	Allowlist     bool `json:"allowlist"`
}

// Allowlist is an operator's upload to a voucher's allowlist, the body of
// POST /api/v1/admin/vouchers/{id}/allowlist (the `AllowlistUpload`
// object): user ids (decimal strings) and person keys, added to the list.
type Allowlist struct {
	UserIDs    []string `json:"user_ids"`
	PersonKeys []string `json:"person_keys"`
}

// AllowlistSize is the answer to an allowlist's upload or clearing (the
// `AllowlistSize` object): how many entries the list holds now.
type AllowlistSize struct {
	VoucherID string `json:"voucher_id"`
	Entries   int64  `json:"entries"`
}

// Draw is a sale by draw, as anyone may check it (the `Draw` object): each
// figure null until published. Commitment and Seed are a seed-based draw's
// (before the beacon), null for the others.
type Draw struct {
	Commitment *string `json:"commitment"`
	Seed       *string `json:"seed"`
	Entries    int64   `json:"entries"`
	Cutoff     *string `json:"cutoff"`
	// Beacon is the round the draw takes its outcome from, null until
	// committed; its signature null until the draw.
	Beacon *Beacon `json:"beacon"`
	// EntriesHash is the hex SHA-256 of the sorted entry ids, each followed
	// by a newline, from begin_at.
	EntriesHash *string `json:"entries_hash"`
	// Commitments are every commitment the draw showed, oldest first.
	Commitments []DrawCommitment `json:"commitments"`
	// Void is true when the draw's state was lost before it was made;
	// VoidReason says what happened.
	Void       bool    `json:"void"`
	VoidReason *string `json:"void_reason"`
}

// Beacon is a drand round a draw commits to (the `Beacon` object).
type Beacon struct {
	Network   string    `json:"network"`
	ChainHash string    `json:"chain_hash"`
	Round     uint64    `json:"round"`
	RoundAt   time.Time `json:"round_at"`
	Signature *string   `json:"signature"`
}

// DrawCommitment is one commitment a draw showed (the `DrawCommitment`
// object): a beacon round or an entries hash.
type DrawCommitment struct {
	Kind        string    `json:"kind"`
	At          time.Time `json:"at"`
	Beacon      *Beacon   `json:"beacon,omitempty"`
	EntriesHash *string   `json:"entries_hash,omitempty"`
}

// WaitingRoom is a voucher's waiting room, out and in (the `WaitingRoom`
// object). Pointers tell a missing figure from zero on the way in.
type WaitingRoom struct {
	AdmitPerSecond  *int64  `json:"admit_per_second"`
	PrequeueSeconds *int64  `json:"prequeue_seconds"`
	Mode            *string `json:"mode,omitempty"`
	DrawPassSeconds *int64  `json:"draw_pass_seconds,omitempty"`
	// DrawHold, in a draw, asks each entry for a card hold.
	DrawHold *bool `json:"draw_hold,omitempty"`
	// Adaptive, absent for a fixed rate, lets the rate follow the back
	// end's health between its bounds.
	Adaptive *Adaptive `json:"adaptive,omitempty"`
}

// Adaptive is an adaptive room's target and bounds (the `Adaptive`
// object). Pointers tell a missing figure from zero on the way in.
type Adaptive struct {
	TargetP99Ms  *int64 `json:"target_p99_ms"`
	MinPerSecond *int64 `json:"min_per_second"`
	MaxPerSecond *int64 `json:"max_per_second"`
}

// NewVoucher is the operator's new voucher, the body of POST
// /api/v1/admin/vouchers (the `NewVoucher` object).
type NewVoucher struct {
	Title      *string `json:"title"`
	Kind       *string `json:"kind"`
	PriceCents *int64  `json:"price_cents"`
	// Currency, absent, is the configured one (SECKILL_CURRENCY).
	Currency        *string `json:"currency"`
	Stock           *int64  `json:"stock"`
	PerUserLimit    *int64  `json:"per_user_limit"`
	BeginAt         *string `json:"begin_at"`
	EndAt           *string `json:"end_at"`
	CaptchaRequired bool    `json:"captcha_required"`
	// Challenge is none (the default), captcha or pow; captcha_required
	// true is the same as captcha.
	Challenge *string `json:"challenge"`
	// Shards defaults to 1; 0 is refused rather than read as the default.
	Shards      *int         `json:"shards"`
	WaitingRoom *WaitingRoom `json:"waiting_room"`
	// Entry, absent or null, takes every shopper.
	Entry *Entry `json:"entry"`
	// GraceSeconds defaults to 600; 0 is a value (no grace).
	GraceSeconds *int64 `json:"grace_seconds"`
}

// VoucherState is the body of PUT /api/v1/admin/vouchers/{id}/state: the
// operator's pause ("paused") or its end ("on_sale").
type VoucherState struct {
	State string `json:"state"`
}

// Stats are a voucher's figures for the operator (the `Stats` object).
type Stats struct {
	VoucherID  string `json:"voucher_id"`
	StockTotal int64  `json:"stock_total"`
	StockLeft  int64  `json:"stock_left"`
	Reserved   int64  `json:"reserved"`
	Created    int64  `json:"created"`
	Paid       int64  `json:"paid"`
	Cancelled  int64  `json:"cancelled"`
	Failed     int64  `json:"failed"`
	// Drift is Redis's view beside PostgreSQL's, and every disagreement in
	// words; absent for vouchers other than seckill ones.
	Drift *Drift `json:"drift,omitempty"`
	// Queue is the waiting room's figures; absent for a voucher without one.
	Queue *QueueStats `json:"queue,omitempty"`
}

// Drift is the drift report of one seckill voucher (Stats.drift).
type Drift struct {
	RedisOnSale bool     `json:"redis_on_sale"`
	RedisLeft   int64    `json:"redis_left"`
	RedisHeld   int64    `json:"redis_held"`
	Pending     int64    `json:"pending"`
	InFlight    int64    `json:"in_flight"`
	OK          bool     `json:"ok"`
	Problems    []string `json:"problems"`
}

// QueueStats are a waiting room's figures (Stats.queue).
type QueueStats struct {
	Waiting    int64 `json:"waiting"`
	Admitted   int64 `json:"admitted"`
	Expired    int64 `json:"expired"`
	PassesUsed int64 `json:"passes_used"`
}

// VoucherChange is an operator's change of a running sale, the body of
// PATCH /api/v1/admin/vouchers/{id} (its schema in gateway/openapi.yaml).
// Pointers tell a missing field from zero, which is refused.
type VoucherChange struct {
	AddStock       *int64  `json:"add_stock"`
	AdmitPerSecond *int64  `json:"admit_per_second"`
	EndAt          *string `json:"end_at"`
	// GraceSeconds, 0 to 3600, changes the grace for a missed turn.
	GraceSeconds *int64 `json:"grace_seconds"`
}

// VoucherChangeRecord is one change made to a running sale, as the record
// keeps it (GET /api/v1/admin/vouchers/{id}/changes): when, by whom (the
// fingerprint of the operator's token, as the logs name it), what it asked
// for (zero or null: unchanged), and the stock total after it.
type VoucherChangeRecord struct {
	At             time.Time  `json:"at"`
	By             string     `json:"by"`
	AddStock       int64      `json:"add_stock"`
	AdmitPerSecond int64      `json:"admit_per_second"`
	EndAt          *time.Time `json:"end_at"`
	StockTotal     int64      `json:"stock_total"`
}
