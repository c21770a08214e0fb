package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/apperr"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newTestTokens(t *testing.T) *Tokens {
	t.Helper()
	tk, err := NewTokens(testSecret, time.Hour)
	require.NoError(t, err)
	return tk
}

// sign makes a token by hand, the way an attacker or a foreign issuer would.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return s
}

func TestNewTokensRefusesWeakConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret []byte
		ttl    time.Duration
		says   string
	}{
		{"short secret", []byte("short"), time.Hour, "at least 32 bytes, got 5"},
		{"secret one byte short", testSecret[:MinSecretLen-1], time.Hour, "at least 32 bytes"},
		{"no lifetime", testSecret, 0, "lifetime must be positive"},
		{"negative lifetime", testSecret, -time.Second, "lifetime must be positive"},
	} {
		_, err := NewTokens(tc.secret, tc.ttl)
		require.ErrorContains(t, err, tc.says, tc.name)
	}
	_, err := NewTokens(testSecret[:MinSecretLen], time.Second)
	require.NoError(t, err, "exactly the minimum is enough")
}

func TestIssueVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	tk := newTestTokens(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 600, time.UTC)
	tk.now = func() time.Time { return now }

	token, exp, err := tk.Issue(42)
	require.NoError(t, err)
	require.Equal(t, now.Truncate(time.Second).Add(time.Hour), exp)
	require.Equal(t, time.UTC, exp.Location())

	id, err := tk.Verify(token)
	require.NoError(t, err)
	require.Equal(t, int64(42), id)

	// The secret is copied: changing the caller's slice changes nothing.
	secret := []byte(string(testSecret))
	tk2, err := NewTokens(secret, time.Hour)
	require.NoError(t, err)
	secret[0] = 'X'
	token2, _, err := tk2.Issue(7)
	require.NoError(t, err)
	tk.now = time.Now
	id, err = tk.Verify(token2)
	require.NoError(t, err)
	require.Equal(t, int64(7), id)

	_, _, err = tk.Issue(0)
	require.ErrorIs(t, err, apperr.ErrInvalidInput)
}

func TestVerifyLeeway(t *testing.T) {
	t.Parallel()
	tk := newTestTokens(t)
	now := time.Now()
	tk.now = func() time.Time { return now }
	token, exp, err := tk.Issue(5)
	require.NoError(t, err)

	tk.now = func() time.Time { return exp.Add(Leeway - time.Second) }
	_, err = tk.Verify(token)
	require.NoError(t, err, "within the leeway a token is still good")

	tk.now = func() time.Time { return exp.Add(Leeway + time.Second) }
	_, err = tk.Verify(token)
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	require.ErrorIs(t, err, jwt.ErrTokenExpired)
}

func TestVerifyAcceptsForeignIssuerClaims(t *testing.T) {
	t.Parallel()
	tk := newTestTokens(t)
	// An external identity provider adds its own claims; sub and exp are
	// what matter.
	token := sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{
		"sub": "9007199254740993", "exp": time.Now().Add(time.Minute).Unix(),
		"iss": "https://idp.example", "aud": "seckill", "name": "Ada",
	})
	id, err := tk.Verify(token)
	require.NoError(t, err)
	require.Equal(t, int64(9007199254740993), id, "ids above 2^53 survive")
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	tk := newTestTokens(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	future := time.Now().Add(time.Hour).Unix()
	good := jwt.MapClaims{"sub": "42", "exp": future}
	valid := sign(t, jwt.SigningMethodHS256, testSecret, good)
	parts := strings.Split(valid, ".")

	cases := map[string]string{
		"empty":            "",
		"garbage":          "not-a-token",
		"two parts":        parts[0] + "." + parts[1],
		"too long":         strings.Repeat("a", MaxTokenLen+1),
		"alg none":         sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good),
		"alg none, no sig": mustNoneUnsigned(t, good),
		"RS256":            sign(t, jwt.SigningMethodRS256, rsaKey, good),
		"HS384 same key":   sign(t, jwt.SigningMethodHS384, testSecret, good),
		"HS512 same key":   sign(t, jwt.SigningMethodHS512, testSecret, good),
		"bad signature":    sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), good),
		"tampered payload": parts[0] + "." + sign2payload(t, jwt.MapClaims{"sub": "43", "exp": future}) + "." + parts[2],
		"expired":          sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": time.Now().Add(-time.Hour).Unix()}),
		"missing exp":      sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42"}),
		"exp as string":    sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": "soon"}),
		"not yet valid":    sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": future, "nbf": time.Now().Add(10 * time.Minute).Unix()}),
		"issued in future": sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "42", "exp": future, "iat": time.Now().Add(10 * time.Minute).Unix()}),
		"missing sub":      sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"exp": future}),
		"sub not a number": sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "alice", "exp": future}),
		"sub zero":         sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "0", "exp": future}),
		"sub negative":     sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "-4", "exp": future}),
		"sub plus sign":    sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "+4", "exp": future}),
		"sub leading zero": sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "04", "exp": future}),
		"sub overflow":     sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "9223372036854775808", "exp": future}),
		"sub as number":    sign(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": 42, "exp": future}),
	}
	for name, token := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			id, err := tk.Verify(token)
			require.ErrorIs(t, err, apperr.ErrUnauthenticated)
			require.Zero(t, id)
		})
	}
}

// sign2payload returns only the base64 payload segment of claims.
func sign2payload(t *testing.T, claims jwt.MapClaims) string {
	return strings.Split(sign(t, jwt.SigningMethodHS256, []byte("whatever-whatever-whatever-whate"), claims), ".")[1]
}

// mustNoneUnsigned is the classic forgery: header alg none, empty signature.
func mustNoneUnsigned(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims).SigningString()
	require.NoError(t, err)
	return s + "."
}

// The fast path must vouch for Issue's own tokens (else it is dead code and
// every cold token pays the library), and leave the rest to the library.
func TestFastVerifyTakesIssuedTokens(t *testing.T) {
	t.Parallel()
	tk := newTestTokens(t)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tk.now = func() time.Time { return now }
	token, exp, err := tk.Issue(42)
	require.NoError(t, err)

	id, gotExp, ok := tk.fast.verify(token, now)
	require.True(t, ok, "Issue's token")
	require.Equal(t, int64(42), id)
	require.True(t, exp.Equal(gotExp), "exp %v, want %v", gotExp, exp)

	_, _, ok = tk.fast.verify(token, exp.Add(Leeway))
	require.False(t, ok, "expired past the leeway")
	_, _, ok = tk.fast.verify(token, now.Add(-time.Hour))
	require.False(t, ok, "issued in the future past the leeway")
	last := token[len(token)-1]
	_, _, ok = tk.fast.verify(token[:len(token)-1]+string(last^1), now)
	require.False(t, ok, "signature changed")
	other, err := NewTokens([]byte("another-secret-of-32-bytes-or-more!!"), time.Hour)
	require.NoError(t, err)
	_, _, ok = other.fast.verify(token, now)
	require.False(t, ok, "signed with another secret")

	// Refusals keep the library's words.
	tk.now = func() time.Time { return exp.Add(time.Hour) }
	_, err = tk.Verify(token)
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	require.ErrorContains(t, err, "expired")
}
