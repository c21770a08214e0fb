package api

import "time"

// QueueJoin is the body of POST /api/v1/vouchers/{id}/queue (the
// `QueueJoin` object).
type QueueJoin struct {
	CaptchaID     string `json:"captcha_id"`
	CaptchaAnswer string `json:"captcha_answer"`
	// ChallengeID and ChallengeAnswer are a solved proof of work (GET
	// /api/v1/challenges?voucher_id=ID) when the voucher's challenge is
	// pow: joining its line asks for one, as buying does.
	ChallengeID     string `json:"challenge_id"`
	ChallengeAnswer string `json:"challenge_answer"`
}

// Queue is a shopper's place in a voucher's waiting room (the `Queue`
// object), answered by the queue routes and pushed in queue frames.
type Queue struct {
	VoucherID string `json:"voucher_id"`
	// State is waiting, admitted, held, expired, sold_out or closed; in a
	// draw entered, won, held, waitlisted, lost or void.
	State string `json:"state"`
	// Position counts from 1 while waiting; 0 otherwise.
	Position   int64 `json:"position"`
	Ahead      int64 `json:"ahead"`
	ETASeconds int64 `json:"eta_seconds"`
	// Pass and PassExpiresAt are set only while admitted with the pass
	// unused; null otherwise.
	Pass          *string    `json:"pass"`
	PassExpiresAt *time.Time `json:"pass_expires_at"`
	// HeldUntil is set only while the state is held: a turn missed, held
	// for its shopper until then (a read of the place within it gives a
	// fresh pass when a unit is free; after it the place goes to the back
	// of the line once); absent otherwise.
	HeldUntil *time.Time `json:"held_until,omitempty"`
	// Ticket is a draw entrant's own rank key once drawn; absent otherwise.
	Ticket *string `json:"ticket,omitempty"`
	// EntryID is a draw entrant's own opaque entry id; absent otherwise.
	EntryID *string `json:"entry_id,omitempty"`
	// Hold is the entry's card hold in a draw that asks for one (the
	// answer of the entry); absent otherwise.
	Hold *DrawHold `json:"hold,omitempty"`
}

// DrawHold is an entry's card hold (the `DrawHold` object).
type DrawHold struct {
	PaymentID    string `json:"payment_id"`
	Provider     string `json:"provider"`
	AmountCents  int64  `json:"amount_cents"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ClientSecret string `json:"client_secret"`
}
