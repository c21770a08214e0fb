package auth

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/seckill/seckill"
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
			if !errors.Is(err, seckill.ErrUnauthenticated) {
				t.Fatalf("refusal not ErrUnauthenticated: %v", err)
			}
			return
		}
		if id <= 0 {
			t.Fatalf("accepted a token without a user: %q", token)
		}
	})
}
