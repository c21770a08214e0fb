// Package i18n says the API's sentences in the caller's language: it owns
// the catalog of translations (English, the source, to Simplified
// Chinese) and the reading of Accept-Language. A sentence is found by its
// English format (as given to apperr.Public, apperr.Publicf,
// Fields.Addf, or a row of gateway/errors.go's table); its arguments are
// put in the translation as fmt.Sprintf puts them in the English.
package i18n

import (
	"fmt"
	"strconv"
	"strings"
)

// Lang is a language the API speaks, as Content-Language names it.
type Lang string

// The languages the API speaks. English is the source, and the answer to
// a caller who asks for none of them.
const (
	English Lang = "en"
	Chinese Lang = "zh-CN"
)

// Sprintf says format with args in l, as fmt.Sprintf says it in English;
// a sentence with no translation in l is said in English. A string
// argument that is itself a sentence of the catalog (a piece of advice, a
// JSON type) is said in l too; names and values are not in it, so they
// stay as sent. A format with no args is said as it is (a constant
// sentence may hold a %).
func (l Lang) Sprintf(format string, args ...any) string {
	if l == Chinese {
		if zh, ok := chinese(format); ok {
			format = zh
			said := make([]any, len(args))
			for i, a := range args {
				said[i] = a
				if s, ok := a.(string); ok {
					if zh, ok := chinese(s); ok {
						said[i] = zh
					}
				}
			}
			args = said
		}
	}
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// Separator joins several sentences of one answer (the reasons of every
// bad field).
func (l Lang) Separator() string {
	if l == Chinese {
		return "；"
	}
	return "; "
}

// Translated says whether format has a Chinese translation.
func Translated(format string) bool {
	_, ok := chinese(format)
	return ok
}

// Negotiate picks the language of an Accept-Language header (RFC 9110,
// section 12.5.4): the highest q among the ranges it names that the API
// speaks, the earlier on a tie; any zh (zh-CN, zh-Hans, zh-TW, ...) is
// Chinese, any en English, * the default. English when the header is
// empty or names nothing the API speaks.
func Negotiate(header string) Lang {
	best, bestQ := English, -1.0
	for part := range strings.SplitSeq(header, ",") {
		tag, params, _ := strings.Cut(part, ";")
		tag = strings.ToLower(strings.TrimSpace(tag))
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0 // a q the RFC does not allow counts as "not acceptable"
				}
				q = f
			}
		}
		var l Lang
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-"):
			l = Chinese
		case tag == "en" || strings.HasPrefix(tag, "en-"), tag == "*":
			l = English
		default:
			continue
		}
		if q > 0 && q > bestQ {
			best, bestQ = l, q
		}
	}
	return best
}
