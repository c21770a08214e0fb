package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Rules for passwords, in characters as gateway/openapi.yaml states them
// (JSON Schema's maxLength counts characters, not bytes).
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

// bcryptMaxInput is the most bcrypt reads: it would silently ignore every
// byte after it, so that longer passwords are hashed first (bcryptInput).
const bcryptMaxInput = 72

// prehashMark starts the bcrypt input of a pre-hashed password. It is never a
// byte of valid UTF-8 and every password is valid UTF-8 (ValidatePassword),
// so no password typed as is can equal another one's digest.
const prehashMark = 0xFF

// hashCost is bcrypt's work factor for new hashes. dummyHash must be made
// with the same cost, or a login for an unknown user is measurably faster.
const hashCost = bcrypt.DefaultCost

// dummyHash is the bcrypt hash (cost 10) of a random password nobody kept. A
// login for an unknown user is compared against it, so it costs the same time
// as one for a known user and the answer's timing does not say which names
// exist.
const dummyHash = "$2a$10$Km.FeCtkQdPSdMk3MW6QaOfE/Ax.3No/QN0FmTe7fHDdCBEe.mAHK"

// ValidatePassword checks the length rules; errors wrap apperr.ErrInvalidInput.
func ValidatePassword(password string) error {
	if !utf8.ValidString(password) || !passwordLenOK(password) {
		return apperr.InvalidField("/password", "the password must be %d to %d characters long", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// passwordLenOK reports whether password has MinPasswordLen to
// MaxPasswordLen characters.
func passwordLenOK(password string) bool {
	n := utf8.RuneCountInString(password)
	return n >= MinPasswordLen && n <= MaxPasswordLen
}

// bcryptInput is what bcrypt hashes for password: the password itself when it
// fits bcrypt's 72 bytes, else prehashMark and its SHA-256 digest (72
// characters outside ASCII take up to 288 bytes, and two such passwords
// sharing their first 72 bytes must not share a hash).
func bcryptInput(password string) []byte {
	if len(password) <= bcryptMaxInput {
		return []byte(password)
	}
	sum := sha256.Sum256([]byte(password))
	return append([]byte{prehashMark}, sum[:]...)
}

// HashPassword returns the bcrypt hash of password after checking its length.
func HashPassword(password string) (string, error) {
	if err := ValidatePassword(password); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword(bcryptInput(password), hashCost)
	if err != nil {
		return "", fmt.Errorf("auth: hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword returns nil when password matches hash, an error wrapping
// apperr.ErrUnauthenticated when it does not, and any other error when the
// stored hash is unreadable (a fault of the store, not of the caller).
func CheckPassword(hash, password string) error {
	err := bcrypt.CompareHashAndPassword([]byte(hash), bcryptInput(password))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return wrongCredentials()
	default:
		return fmt.Errorf("auth: stored password hash: %w", err)
	}
}

// wrongCredentials is the one answer for an unknown user and a wrong
// password, so the two cannot be told apart.
func wrongCredentials() error {
	return unauthenticated("the username or password is wrong")
}
