package auth

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/apperr"
)

// TestVerifiedTokensAreRemembered: a second Verify of a token is a cache
// hit, a token that differs in any byte is not, and the expiry is still
// judged on every hit.
func TestVerifiedTokensAreRemembered(t *testing.T) {
	tk, err := NewTokens([]byte(strings.Repeat("k", MinSecretLen)), time.Hour)
	require.NoError(t, err)
	now := time.Now()
	tk.now = func() time.Time { return now }
	token, exp, err := tk.Issue(77)
	require.NoError(t, err)

	id, err := tk.Verify(token)
	require.NoError(t, err)
	require.EqualValues(t, 77, id)
	_, cached := tk.verified.get(token, now)
	require.True(t, cached)
	id, err = tk.Verify(token)
	require.NoError(t, err)
	require.EqualValues(t, 77, id)

	// A forged signature is another key: parsed, and refused.
	forged := token[:len(token)-2] + flip(token[len(token)-2:])
	_, err = tk.Verify(forged)
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	_, cached = tk.verified.get(forged, now)
	require.False(t, cached)

	// Past exp + Leeway the cached token is refused like any expired one.
	tk.now = func() time.Time { return exp.Add(Leeway + time.Second) }
	_, err = tk.Verify(token)
	require.ErrorIs(t, err, apperr.ErrUnauthenticated)
	var pe interface{ PublicMessage() string }
	require.True(t, errors.As(err, &pe))
	require.Contains(t, pe.PublicMessage(), "expired")
}

func TestVerifiedTokensAreBounded(t *testing.T) {
	var v verifiedTokens
	exp := time.Now().Add(time.Hour)
	for i := range maxVerified + 10 {
		v.put("token-"+strconv.Itoa(i), int64(i+1), exp)
	}
	require.LessOrEqual(t, len(v.m), maxVerified)
	require.Positive(t, len(v.m))
}

func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}
