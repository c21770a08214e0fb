package web_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/web"
)

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(web.FS(), name)
	require.NoError(t, err)
	return string(b)
}

func TestEmbedsThePages(t *testing.T) {
	for _, name := range []string{web.ShopperPage, web.AdminPage, "app.js", "admin.js", "report.js", "style.css"} {
		require.NotEmpty(t, read(t, name), name)
	}
	shop, admin := read(t, web.ShopperPage), read(t, web.AdminPage)
	require.Contains(t, shop, `src="app.js"`)
	require.Contains(t, shop, `src="remind.js"`)
	require.NotEmpty(t, read(t, "sw.js"))
	require.Contains(t, shop, `href="style.css"`)
	require.Contains(t, admin, `src="admin.js"`)
	require.Contains(t, admin, `src="report.js"`)
	require.Contains(t, admin, `href="style.css"`)
}

// The pages must work offline and under a strict Content-Security-Policy
// (script-src 'self'; style-src 'self'): nothing from another origin, no
// inline script, no inline style.
func TestNoExternalOrInlineAssets(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//|@import|url\(\s*["']?(https?:)?//|fonts\.googleapis`)
	inlineScript := regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]`)
	handler := regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
	style := regexp.MustCompile(`(?i)\sstyle\s*=|<style`)
	for _, name := range []string{web.ShopperPage, web.AdminPage, "app.js", "admin.js", "report.js", "remind.js", "sw.js", "style.css"} {
		s := read(t, name)
		require.NotRegexp(t, external, s, name)
		if strings.HasSuffix(name, ".html") {
			require.NotRegexp(t, inlineScript, s, name)
			require.NotRegexp(t, handler, s, name)
			require.NotRegexp(t, style, s, name)
		}
	}
}

// Every <label for> points at a field, and every visible field of the
// static markup has a label (the template fields get theirs from app.js).
func TestLabelsPointAtFields(t *testing.T) {
	ids := regexp.MustCompile(`\sid="([^"]+)"`)
	fors := regexp.MustCompile(`\sfor="([^"]+)"`)
	inputs := regexp.MustCompile(`<(?:input|select|textarea)\b[^>]*\sid="([^"]+)"`)
	for _, name := range []string{web.ShopperPage, web.AdminPage} {
		s := read(t, name)
		have := map[string]bool{}
		for _, m := range ids.FindAllStringSubmatch(s, -1) {
			require.False(t, have[m[1]], "%s: duplicate id %q", name, m[1])
			have[m[1]] = true
		}
		labelled := map[string]bool{}
		for _, m := range fors.FindAllStringSubmatch(s, -1) {
			require.True(t, have[m[1]], "%s: label for unknown id %q", name, m[1])
			labelled[m[1]] = true
		}
		for _, m := range inputs.FindAllStringSubmatch(s, -1) {
			// A radio wrapped in its <label> is labelled by it.
			if labelled[m[1]] || strings.Contains(s, `<label class="seg"><input type="radio" name="mode" id="`+m[1]+`"`) {
				continue
			}
			t.Errorf("%s: field #%s has no label", name, m[1])
		}
	}
}

// The hooks documented at the top of each script exist in its page (or are
// set by the script), so a browser test written from the comment works.
func TestDocumentedHooksExist(t *testing.T) {
	for page, script := range map[string]string{web.ShopperPage: "app.js", web.AdminPage: "admin.js"} {
		html, js := read(t, page), read(t, script)
		end := strings.Index(js, "*/")
		require.Positive(t, end, script)
		doc := js[:end]
		for _, m := range regexp.MustCompile(`#([a-z][a-z0-9-]*)`).FindAllStringSubmatch(doc, -1) {
			require.Contains(t, html, `id="`+m[1]+`"`, "%s documents #%s", script, m[1])
		}
		for _, m := range regexp.MustCompile(`(?:^|\s)\.([a-z][a-z-]*)`).FindAllStringSubmatch(doc, -1) {
			require.Regexp(t, `class="(?:[^"]* )?`+regexp.QuoteMeta(m[1])+`(?: [^"]*)?"`, html, "%s documents .%s", script, m[1])
		}
		for _, m := range regexp.MustCompile(`\[(data-[a-z-]+)`).FindAllStringSubmatch(doc, -1) {
			require.True(t, strings.Contains(html, m[1]) || strings.Contains(js, "dataset."+camel(strings.TrimPrefix(m[1], "data-"))),
				"%s documents [%s]", script, m[1])
		}
	}
}

func camel(s string) string {
	parts := strings.Split(s, "-")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

// Every error code of gateway/openapi.yaml a shopper can meet has a
// sentence on the shopper page, in each of its languages.
func TestEveryErrorCodeHasASentence(t *testing.T) {
	tables := messageTables(t)
	for _, code := range []string{
		"invalid_input", "captcha_invalid", "unauthenticated", "forbidden", "not_found",
		"sold_out", "limit_exceeded", "not_started", "ended", "conflict", "username_taken",
		"too_large", "rate_limited", "unavailable", "unpaid_limit", "internal",
		"not_admitted", "sale_paused", "challenge_invalid", "not_eligible",
	} {
		for lang, keys := range tables {
			require.True(t, keys["err_"+code], "%s has no sentence for %s", lang, code)
		}
	}
}

// messageTables reads the keys of each language's table in app.js.
func messageTables(t *testing.T) map[string]map[string]bool {
	t.Helper()
	js := read(t, "app.js")
	start := strings.Index(js, "const MESSAGES = {")
	require.Positive(t, start)
	end := strings.Index(js[start:], "\n  };\n")
	require.Positive(t, end)
	tables := map[string]map[string]bool{}
	var cur map[string]bool
	for _, line := range strings.Split(js[start:start+end], "\n") {
		if m := regexp.MustCompile(`^    '?([a-zA-Z-]+)'?: \{$`).FindStringSubmatch(line); m != nil {
			cur = map[string]bool{}
			tables[m[1]] = cur
		} else if m := regexp.MustCompile(`^      ([a-zA-Z_]+):`).FindStringSubmatch(line); m != nil && cur != nil {
			require.False(t, cur[m[1]], "key %s twice", m[1])
			cur[m[1]] = true
		}
	}
	return tables
}

// The page speaks English and Simplified Chinese, with the same sentences
// in each; every key the markup and the script name is in them.
func TestMessageTablesMatch(t *testing.T) {
	tables := messageTables(t)
	require.Len(t, tables, 2)
	en, zh := tables["en"], tables["zh-CN"]
	require.Greater(t, len(en), 100)
	for k := range en {
		require.True(t, zh[k], "zh-CN lacks %s", k)
	}
	for k := range zh {
		require.True(t, en[k], "en lacks %s", k)
	}
	html := read(t, web.ShopperPage)
	for _, m := range regexp.MustCompile(`data-i18n(?:-[a-z-]+)?="([^"]+)"`).FindAllStringSubmatch(html, -1) {
		require.True(t, en[m[1]], "index.html names %s", m[1])
	}
	js := read(t, "app.js")
	for _, m := range regexp.MustCompile(`\b(?:t|setKeyed\([^,]+,)\s*\(?'([a-zA-Z_]+)'`).FindAllStringSubmatch(js, -1) {
		require.True(t, en[m[1]], "app.js names %s", m[1])
	}
}
