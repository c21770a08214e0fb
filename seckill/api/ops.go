package api

import (
	"encoding/json"
	"time"
)

// Captcha is a captcha to answer before a buy or a join that needs one (the
// `Captcha` object).
type Captcha struct {
	CaptchaID string `json:"captcha_id"`
	// Image is a data:image/png;base64 URL (absent for an audio captcha).
	Image string `json:"image,omitempty"`
	// Audio is a data:audio/wav;base64 URL: the same kind of answer,
	// spoken (GET /api/v1/captcha?kind=audio).
	Audio string `json:"audio,omitempty"`
}

// Challenge is a proof of work to solve before buying a voucher whose
// challenge is pow (the `Challenge` object): a decimal nonce such that
// SHA-256(salt + nonce) begins with DifficultyBits zero bits.
type Challenge struct {
	ChallengeID    string    `json:"challenge_id"`
	Kind           string    `json:"kind"`
	Algorithm      string    `json:"algorithm"`
	Salt           string    `json:"salt"`
	DifficultyBits int       `json:"difficulty_bits"`
	ExpiresAt      time.Time `json:"expires_at"`
}

// BreakerMode is the body of PUT /api/v1/admin/breaker: auto, open or
// closed.
type BreakerMode struct {
	Mode string `json:"mode"`
}

// Breaker is the fleet-wide breaker mode and this instance's breaker state
// (the `Breaker` object).
type Breaker struct {
	Mode  string `json:"mode"`
	State string `json:"state"`
	// Paths is each dependency path's state, when the breaker has paths.
	Paths map[string]string `json:"paths,omitempty"`
}

// Health is the body of GET /healthz: {"status":"ok"}.
type Health struct {
	Status string `json:"status"`
}

// Ready is the body of GET /readyz when every check passed:
// {"checks":{"<name>":"ok",...},"status":"ready"}. Checks comes first
// because the body has always been written with its keys in order.
type Ready struct {
	Checks map[string]string `json:"checks"`
	Status string            `json:"status"`
}

// OperatorAction is one entry of the operators' trail (the
// `OperatorAction` object): a change an operator made, who made it (an
// operator's name; root for SECKILL_ADMIN_TOKEN, cli:<account> for the
// seckill command), what, to what, when, through which request, and the
// change asked for.
type OperatorAction struct {
	ID        string    `json:"id"`
	At        time.Time `json:"at"`
	Operator  string    `json:"operator"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	RequestID string    `json:"request_id"`
	// IdempotencyKey is the request's Idempotency-Key, when it had one.
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Change         json.RawMessage `json:"change"`
}

// OperatorActions is one page of the trail, oldest first (GET
// /api/v1/admin/actions): NextAfter is the after of the next page (the
// last entry's id; the request's own when the page is empty).
type OperatorActions struct {
	Actions   []OperatorAction `json:"actions"`
	NextAfter string           `json:"next_after"`
}
