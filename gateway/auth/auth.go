// Package auth says who the caller is: password hashes (bcrypt) for the
// accounts this platform keeps, and JWTs (HS256) for every request after the
// login. It knows nothing of HTTP; the gateway reads the bearer token and asks
// [Tokens.Verify].
//
// Every error a caller should turn into an answer wraps one of the sentinels
// of package seckill: ErrUnauthenticated for a missing, forged or expired
// token and for wrong credentials, ErrInvalidInput for a username or password
// that breaks the rules, ErrUsernameTaken (from the [UserStore]) for a name in
// use. Errors whose text is fit for a shopper also carry it in a
// PublicMessage method, which the gateway shows instead of its generic one.
package auth

import "github.com/flashsale/seckill/seckill"

// publicError is a sentinel plus a sentence a shopper may read. The sentence
// never holds anything the caller did not send.
type publicError struct {
	kind  error
	msg   string
	cause error // optional, for logs and errors.Is
}

func (e *publicError) Error() string {
	if e.cause != nil {
		return e.kind.Error() + ": " + e.msg + ": " + e.cause.Error()
	}
	return e.kind.Error() + ": " + e.msg
}

func (e *publicError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

// PublicMessage is the sentence the gateway shows the caller.
func (e *publicError) PublicMessage() string { return e.msg }

func invalidInput(msg string) error {
	return &publicError{kind: seckill.ErrInvalidInput, msg: msg}
}

func unauthenticated(msg string) error {
	return &publicError{kind: seckill.ErrUnauthenticated, msg: msg}
}
