// Package apperr is the platform's vocabulary of errors: the kinds every
// layer wraps with %w (invalid input, unauthenticated, not found,
// unavailable, ...) and PublicError, an error of a kind that carries a
// sentence its caller may read. The gateway maps the kinds to HTTP in
// exactly one table (gateway/errors.go); the buying domain's own refusals
// (sold out, limit exceeded, ...) are declared by package seckill.
//
// It imports nothing but the standard library, so every package of the
// module may use it (deploy/tools/depcheck keeps it so).
package apperr

import "errors"

// The kinds of error of the whole platform. Every layer wraps one of these
// with %w; the gateway maps them to HTTP in exactly one table.
var (
	ErrInvalidInput   = errors.New("invalid input")
	ErrCaptchaInvalid = errors.New("captcha invalid")
	// ErrChallengeInvalid is a challenge missing, wrong, expired or used:
	// a proof-of-work answer, or the captcha of a registration.
	ErrChallengeInvalid = errors.New("challenge invalid")
	ErrUnauthenticated  = errors.New("unauthenticated")
	ErrForbidden        = errors.New("forbidden")
	ErrNotFound         = errors.New("not found")
	ErrConflict         = errors.New("conflict")
	ErrUsernameTaken    = errors.New("username taken")
	ErrTooLarge         = errors.New("body too large")
	ErrRateLimited      = errors.New("rate limited")
	ErrUnavailable      = errors.New("unavailable")
)
