package auth

import (
	"testing"
	"time"
)

// BenchmarkVerifyCold verifies a token this process has not seen before
// (the verified-token cache is bypassed): through the JWT library, and
// through the hand-written path that Verify tries first.
func BenchmarkVerifyCold(b *testing.B) {
	tk, err := NewTokens(testSecret, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	token, _, err := tk.Issue(42)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("library", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tk.verifyLibrary(token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := tk.fast.verify(token, tk.now()); !ok {
				b.Fatal("fast path refused Issue's token")
			}
		}
	})
}
