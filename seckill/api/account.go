package api

import "time"

// Credentials is the body of POST /api/v1/users and /api/v1/sessions (the
// `Credentials` object). The captcha is the login's, once its username has
// too many failed logins; registration ignores it.
type Credentials struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	CaptchaID     string `json:"captcha_id,omitempty"`
	CaptchaAnswer string `json:"captcha_answer,omitempty"`
	// ChallengeID and ChallengeAnswer are a solved proof of work (GET
	// /api/v1/challenges?purpose=register) when registering takes one.
	ChallengeID     string `json:"challenge_id,omitempty"`
	ChallengeAnswer string `json:"challenge_answer,omitempty"`
}

// User is an account (the `User` object).
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
}

// Session is a signed-in shopper's bearer token (the `Session` object).
type Session struct {
	Token     string    `json:"token"`
	UserID    string    `json:"user_id"`
	ExpiresAt time.Time `json:"expires_at"`
}
