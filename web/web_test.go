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
	for _, name := range []string{web.ShopperPage, web.AdminPage, "app.js", "admin.js", "report.js", "style.css"} {
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

// Every error code of gateway/openapi.yaml has a sentence on the shopper page.
func TestEveryErrorCodeHasASentence(t *testing.T) {
	js := read(t, "app.js")
	for _, code := range []string{
		"invalid_input", "captcha_invalid", "unauthenticated", "forbidden", "not_found",
		"sold_out", "limit_exceeded", "not_started", "ended", "conflict", "username_taken",
		"too_large", "rate_limited", "unavailable", "unpaid_limit", "internal",
	} {
		if code == "internal" { // the default branch
			require.Contains(t, js, "default: return 'Something went wrong")
			continue
		}
		require.Contains(t, js, "case '"+code+"':", code)
	}
}
