package i18n_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway/i18n"
)

// TestNegotiate: the highest q among the languages the API speaks wins,
// the earlier on a tie; every zh is Chinese; q=0 refuses; * and the
// unknown fall to English.
func TestNegotiate(t *testing.T) {
	for header, want := range map[string]i18n.Lang{
		"":                                 i18n.English,
		"zh-CN":                            i18n.Chinese,
		"zh":                               i18n.Chinese,
		"zh-Hans-CN":                       i18n.Chinese,
		"ZH-tw":                            i18n.Chinese,
		"en-GB":                            i18n.English,
		"zh-CN,zh;q=0.9,en;q=0.8":          i18n.Chinese,
		"en;q=0.9, zh;q=0.95":              i18n.Chinese,
		"zh;q=0.5, en":                     i18n.English,
		"en, zh":                           i18n.English,
		"zh;q=0, en;q=0.1":                 i18n.English,
		"zh;q=0":                           i18n.English,
		"fr, de;q=0.8":                     i18n.English,
		"fr, zh;q=0.2":                     i18n.Chinese,
		"*":                                i18n.English,
		"*;q=0.5, zh-Hant;q=0.6":           i18n.Chinese,
		"zh;q=abc, en;q=0.1":               i18n.English,
		"zh;q=2":                           i18n.English,
		";;;,,,  ,q=1":                     i18n.English,
		"zh-CN; q=0.8 ; foo=bar, en;q=0.7": i18n.Chinese,
	} {
		require.Equal(t, want, i18n.Negotiate(header), "Accept-Language: %q", header)
	}
}

// TestSprintf: a translated sentence keeps its arguments; a string
// argument that is itself a sentence of the catalog is translated too;
// a sentence without a translation is said in English.
func TestSprintf(t *testing.T) {
	require.Equal(t, "stock 必须为 1 到 100", i18n.Chinese.Sprintf("stock must be 1 to %d", 100))
	require.Equal(t, "stock must be 1 to 100", i18n.English.Sprintf("stock must be 1 to %d", 100))
	require.Equal(t, `字段 "/price_cents" 必须是字符串`, i18n.Chinese.Sprintf("field %q must be %s", "/price_cents", "a string"))
	require.Equal(t, "no such sentence 7", i18n.Chinese.Sprintf("no such sentence %d", 7))
	require.Equal(t, "已售罄", i18n.Chinese.Sprintf("this voucher is sold out"))
	require.Equal(t, "100% sure", i18n.English.Sprintf("100% sure"), "a constant sentence is not a format")
}
