package api_test

import (
	"encoding/json"
	"testing"

	"github.com/flashsale/seckill/seckill/api"
)

// FuzzPlainText: a string PlainText lets through is written by
// encoding/json between its quotes as it is, so a hand-written encoder may
// copy it.
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"", "bench-17", "sold_out", `a"b`, `a\b`, "<script>", "a&b", "é", "\x7f", "\u2028", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !api.PlainText(s) {
			return
		}
		b, err := json.Marshal(s)
		if err != nil || string(b) != `"`+s+`"` {
			t.Fatalf("PlainText(%q), but json.Marshal writes %s (%v)", s, b, err)
		}
	})
}
