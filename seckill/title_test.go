package seckill_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill"
	"github.com/flashsale/seckill/seckill/apperr"
)

// TestVoucherTitleText: a title is one line of valid UTF-8, at most
// MaxTitleLen characters however many bytes they take. NUL (which
// PostgreSQL refuses), every other control character, tabs and line breaks
// included, and invalid UTF-8 are the operator's input error, said plainly.
func TestVoucherTitleText(t *testing.T) {
	for _, title := range []string{"Café ☕ −50 %", "日本語のクーポン", "a b", strings.Repeat("é", seckill.MaxTitleLen)} {
		v := validVoucher()
		v.Title = title
		require.NoError(t, v.Validate(), "%q", title)
	}
	for _, title := range []string{
		"a\x00b", "\xff", "ok\xc3", "tab\there", "line\nbreak", "cr\rhere", "esc\x1b[31m", "del\x7f", "c1\u0085next",
		strings.Repeat("é", seckill.MaxTitleLen+1),
	} {
		v := validVoucher()
		v.Title = title
		err := v.Validate()
		require.ErrorIs(t, err, apperr.ErrInvalidInput, "%q", title)
		require.Contains(t, err.Error(), "title", "%q", title)
	}
}
