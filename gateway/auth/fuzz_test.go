package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/seckill/seckill/apperr"
)

// FuzzVerify: no token makes Verify panic, and every refusal is
// ErrUnauthenticated. Whatever it accepts must carry a positive user id.
func FuzzVerify(f *testing.F) {
	tk, err := NewTokens(testSecret, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	good, _, err := tk.Issue(42)
	if err != nil {
		f.Fatal(err)
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "42", "exp": 4102444800}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, s := range []string{good, none, "", ".", "..", "a.b.c", good + "x", "eyJhbGciOiJIUzI1NiJ9.e30."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, err := tk.Verify(token)
		if err != nil {
			if !errors.Is(err, apperr.ErrUnauthenticated) {
				t.Fatalf("refusal not ErrUnauthenticated: %v", err)
			}
			return
		}
		if id <= 0 {
			t.Fatalf("accepted a token without a user: %q", token)
		}
	})
}

// FuzzFastVerify: the hand-written path never accepts a token the JWT
// library refuses, and when it accepts, it agrees with the library on the
// user and on exp. The fuzzer writes the header and the claims; the token is
// signed with the right secret (or, when forge is set, a wrong one), so that
// the signature check passes and the claims parser and the time checks are
// what gets explored; raw is also tried as a whole token.
func FuzzFastVerify(f *testing.F) {
	tk, err := NewTokens(testSecret, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	tk.now = func() time.Time { return now }
	for _, c := range []struct{ header, claims string }{
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":1900003600,"iat":1900000000}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":1900003600}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":1899999990,"iat":1899990000}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":1900003600,"iat":1900000040}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"042","exp":1900003600}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"9223372036854775808","exp":1900003600}`},
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"42","exp":1900003600,"nbf":1900000100}`},
		{`{"alg":"HS256"}`, `{"sub":"42","exp":1900003600}`},
		{`{"alg":"none","typ":"JWT"}`, `{"sub":"42","exp":1900003600}`},
	} {
		f.Add(c.header, c.claims, false, "")
	}
	good, _, err := tk.Issue(7)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("", "", true, good)
	f.Add("", "", false, good+"A")
	mac := func(key []byte, text string) string {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(text))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	f.Fuzz(func(t *testing.T, header, claims string, forge bool, raw string) {
		key := testSecret
		if forge {
			key = []byte("another-secret-of-32-bytes-or-more!!")
		}
		text := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
		for _, token := range []string{text + "." + mac(key, text), raw} {
			id, exp, ok := tk.fast.verify(token, now)
			if !ok {
				continue
			}
			var rc jwt.RegisteredClaims
			if _, err := tk.parser.ParseWithClaims(token, &rc, tk.key); err != nil {
				t.Fatalf("fast path accepted %q, the library refuses it: %v", token, err)
			}
			libID, err := parseUserID(rc.Subject)
			if err != nil {
				t.Fatalf("fast path accepted %q with user %d, the library's sub %q is not a user id", token, id, rc.Subject)
			}
			if libID != id || !rc.ExpiresAt.Time.Equal(exp) {
				t.Fatalf("token %q: fast path says user %d exp %v, the library %d %v", token, id, exp, libID, rc.ExpiresAt.Time)
			}
		}
	})
}
