package auth

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/seckill/seckill/apperr"
)

// Rules of the tokens this platform accepts.
const (
	// Algorithm is the only signing algorithm accepted. Pinning it closes the
	// classic holes: "none", and an RS256 public key used as an HMAC secret.
	Algorithm = "HS256"
	// Leeway is the clock skew tolerated on exp, nbf and iat between the
	// token's issuer and this server: enough for NTP-synced machines, small
	// enough that an expired token dies within half a minute.
	Leeway = 30 * time.Second
	// MinSecretLen is the shortest HS256 secret accepted (256 bits, the
	// hash's own size; shorter secrets can be brute forced offline from any
	// one token).
	MinSecretLen = 32
	// MaxTokenLen bounds what is parsed at all; a real token is a few hundred
	// bytes.
	MaxTokenLen = 4096
)

// Tokens issues and verifies the HS256 JWTs of gateway/openapi.yaml: claim sub is the user
// id in decimal, exp is required. It is safe for concurrent use.
type Tokens struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
	parser *jwt.Parser
	// verified skips the parse for tokens verified before (verified.go).
	verified verifiedTokens
	// fast verifies Issue's own tokens without the library (fastverify.go).
	fast *fastVerifier
}

// NewTokens returns Tokens signing with secret; issued tokens live for ttl.
// The secret must be at least MinSecretLen bytes.
func NewTokens(secret []byte, ttl time.Duration) (*Tokens, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: the JWT secret must be at least %d bytes, got %d", MinSecretLen, len(secret))
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("auth: token lifetime must be positive, got %v", ttl)
	}
	t := &Tokens{secret: bytes.Clone(secret), ttl: ttl, now: time.Now, fast: newFastVerifier(secret)}
	t.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{Algorithm}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithStrictDecoding(),
		// Through t.now, so a test can move the clock.
		jwt.WithTimeFunc(func() time.Time { return t.now() }),
	)
	return t, nil
}

// TTL is how long an issued token lives.
func (t *Tokens) TTL() time.Duration { return t.ttl }

// Issue returns a token for userID and the moment it expires (whole seconds,
// as in the token's exp).
func (t *Tokens) Issue(userID int64) (string, time.Time, error) {
	if userID <= 0 {
		return "", time.Time{}, fmt.Errorf("%w: user id must be positive, got %d", apperr.ErrInvalidInput, userID)
	}
	now := t.now().UTC().Truncate(time.Second)
	exp := now.Add(t.ttl)
	claims := jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(t.secret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: sign token: %w", err)
	}
	return token, exp, nil
}

// Verify checks a token's algorithm, signature, exp (required) and the other
// time claims within Leeway, and returns the user id of its sub. Every
// failure wraps apperr.ErrUnauthenticated.
func (t *Tokens) Verify(token string) (int64, error) {
	if token == "" {
		return 0, unauthenticated("sign in first")
	}
	if len(token) > MaxTokenLen {
		return 0, fmt.Errorf("%w: token longer than %d bytes", apperr.ErrUnauthenticated, MaxTokenLen)
	}
	now := t.now()
	if id, ok := t.verified.get(token, now); ok {
		return id, nil
	}
	if id, exp, ok := t.fast.verify(token, now); ok {
		t.verified.put(token, id, exp)
		return id, nil
	}
	return t.verifyLibrary(token)
}

// verifyLibrary is Verify through the JWT library: every token the fast
// path does not vouch for, and every refusal's words.
func (t *Tokens) verifyLibrary(token string) (int64, error) {
	var claims jwt.RegisteredClaims
	if _, err := t.parser.ParseWithClaims(token, &claims, t.key); err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return 0, &apperr.PublicError{Kind: apperr.ErrUnauthenticated, Message: "your session has expired; please sign in again", Cause: err}
		}
		return 0, fmt.Errorf("%w: %w", apperr.ErrUnauthenticated, err)
	}
	id, err := parseUserID(claims.Subject)
	if err != nil {
		return 0, err
	}
	// exp is required, so the parser has refused a token without it.
	t.verified.put(token, id, claims.ExpiresAt.Time)
	return id, nil
}

// key hands the secret to the parser, and only for HMAC: WithValidMethods
// already refuses every other algorithm, this is the second lock.
func (t *Tokens) key(tok *jwt.Token) (any, error) {
	if m, ok := tok.Method.(*jwt.SigningMethodHMAC); !ok || m.Alg() != Algorithm {
		return nil, fmt.Errorf("unexpected signing method %v", tok.Header["alg"])
	}
	return t.secret, nil
}

// parseUserID accepts only the canonical decimal spelling of a positive
// int64, so one user has exactly one sub.
func parseUserID(sub string) (int64, error) {
	id, err := strconv.ParseInt(sub, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != sub {
		return 0, fmt.Errorf("%w: token subject is not a user id", apperr.ErrUnauthenticated)
	}
	return id, nil
}
