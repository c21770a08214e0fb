// Package auth says who the caller is: password hashes (bcrypt) for the
// accounts this platform keeps, and JWTs (HS256) for every request after the
// login. It knows nothing of HTTP; the gateway reads the bearer token and asks
// [Tokens.Verify].
//
// Every error a caller should turn into an answer wraps one of the kinds of
// seckill/apperr: ErrUnauthenticated for a missing, forged or expired token
// and for wrong credentials, ErrInvalidInput for a username or password that
// breaks the rules, ErrUsernameTaken (from the [UserStore]) for a name in
// use. Errors whose text is fit for a shopper also carry it in an
// [apperr.PublicError], whose sentence the gateway shows instead of its
// generic one.
package auth

import (
	"github.com/flashsale/seckill/seckill/apperr"
)

func invalidInput(msg string) error { return apperr.Public(apperr.ErrInvalidInput, msg) }

func unauthenticated(msg string) error { return apperr.Public(apperr.ErrUnauthenticated, msg) }
