package auth

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/bcrypt"
)

// Rules for passwords. bcrypt reads at most 72 bytes, so a longer password
// would silently share a hash with its first 72 bytes: refuse it instead.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 72
)

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
	if len(password) < MinPasswordLen || len(password) > MaxPasswordLen {
		return invalidInput(fmt.Sprintf("the password must be %d to %d bytes long", MinPasswordLen, MaxPasswordLen))
	}
	return nil
}

// HashPassword returns the bcrypt hash of password after checking its length.
func HashPassword(password string) (string, error) {
	if err := ValidatePassword(password); err != nil {
		return "", err
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), hashCost)
	if err != nil {
		return "", fmt.Errorf("auth: hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword returns nil when password matches hash, an error wrapping
// apperr.ErrUnauthenticated when it does not, and any other error when the
// stored hash is unreadable (a fault of the store, not of the caller).
func CheckPassword(hash, password string) error {
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password))
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
