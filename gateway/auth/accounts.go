package auth

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Rules for usernames: what the users table accepts, in characters that need
// no escaping anywhere they are shown.
const (
	MinUsernameLen = 3
	MaxUsernameLen = 32
)

// User is an account of this platform.
type User struct {
	ID           int64
	Username     string
	PasswordHash string
}

// UserStore keeps the accounts (orders/pgstore implements it).
type UserStore interface {
	// CreateUser stores a user and returns its id. A name already in use is
	// an error wrapping apperr.ErrUsernameTaken.
	CreateUser(ctx context.Context, username, passwordHash string) (int64, error)
	// UserByName returns the user called username, or an error wrapping
	// apperr.ErrNotFound.
	UserByName(ctx context.Context, username string) (User, error)
}

// Accounts registers users and logs them in.
type Accounts struct {
	store  UserStore
	tokens *Tokens
	// spend is the comparison an unknown user's login runs against
	// dummyHash, so it costs what a real one does (a field so that a test
	// can see it ran without timing it).
	spend func(hash, password []byte) error
}

// NewAccounts returns Accounts keeping users in store and issuing tokens.
func NewAccounts(store UserStore, tokens *Tokens) *Accounts {
	return &Accounts{store: store, tokens: tokens, spend: bcrypt.CompareHashAndPassword}
}

// ValidateUsername checks a username: MinUsernameLen to MaxUsernameLen of
// a-z, A-Z, 0-9, '_', '.', '-'. Errors wrap apperr.ErrInvalidInput.
func ValidateUsername(username string) error {
	if !validUsername(username) {
		return apperr.InvalidField("/username", "the username must be %d to %d letters, digits, '_', '.' or '-'", MinUsernameLen, MaxUsernameLen)
	}
	return nil
}

func validUsername(s string) bool {
	if len(s) < MinUsernameLen || len(s) > MaxUsernameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Register creates an account. Bad input wraps apperr.ErrInvalidInput; a
// name in use wraps apperr.ErrUsernameTaken.
func (a *Accounts) Register(ctx context.Context, username, password string) (User, error) {
	// Both fields are judged before either is refused, so the caller
	// learns of both at once.
	var f apperr.Fields
	if err := f.Merge(ValidateUsername(username)); err != nil {
		return User{}, err
	}
	if err := f.Merge(ValidatePassword(password)); err != nil {
		return User{}, err
	}
	if err := f.Err(); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	id, err := a.store.CreateUser(ctx, username, hash)
	if err != nil {
		return User{}, fmt.Errorf("auth: register: %w", err)
	}
	return User{ID: id, Username: username, PasswordHash: hash}, nil
}

// Login checks the credentials and returns a token for the user, its id and
// when the token expires. An unknown user and a wrong password are the same
// error (wrapping apperr.ErrUnauthenticated) and take the same time.
func (a *Accounts) Login(ctx context.Context, username, password string) (string, int64, time.Time, error) {
	if username == "" || password == "" {
		return "", 0, time.Time{}, invalidInput("username and password are required")
	}
	// Names and passwords no account can have are refused at once: the
	// answer depends only on what the caller sent, so it says nothing about
	// which accounts exist.
	if !validUsername(username) || utf8.RuneCountInString(password) > MaxPasswordLen {
		return "", 0, time.Time{}, wrongCredentials()
	}
	u, err := a.store.UserByName(ctx, username)
	switch {
	case errors.Is(err, apperr.ErrNotFound):
		// Spend the same time as a real comparison; the result is ignored.
		_ = a.spend([]byte(dummyHash), bcryptInput(password))
		return "", 0, time.Time{}, wrongCredentials()
	case err != nil:
		return "", 0, time.Time{}, fmt.Errorf("auth: login: %w", err)
	}
	if err := CheckPassword(u.PasswordHash, password); err != nil {
		return "", 0, time.Time{}, err
	}
	token, exp, err := a.tokens.Issue(u.ID)
	if err != nil {
		return "", 0, time.Time{}, err
	}
	return token, u.ID, exp, nil
}
