package systemtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// The accessibility harness of the browser tests: axe-core (pinned in
// deploy/tools/webcheck, installed by `make test-deps`) injected into the
// page and run against WCAG 2.2 AA, in each color scheme and on a phone and
// a desktop; and the keys a keyboard-only shopper presses.

// axeTags are the rule sets run: WCAG 2.0, 2.1 and 2.2, levels A and AA.
var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"}

// a11yView is one way a page is looked at: a color scheme and a screen.
type a11yView struct {
	scheme        string // prefers-color-scheme: light or dark
	size          string // phone or desktop
	width, height int64
	mobile        bool
}

// a11yViews are the four views every state is checked in: an iPhone-sized
// phone (390x844) and a laptop (1280x800), each light and dark.
var a11yViews = []a11yView{
	{"light", "desktop", 1280, 800, false},
	{"dark", "desktop", 1280, 800, false},
	{"light", "phone", 390, 844, true},
	{"dark", "phone", 390, 844, true},
}

// axeSource is axe-core's browser build, as `make test-deps` installs it.
// A missing file is a failure: the pages are only known to pass once the
// engine ran.
func axeSource(t *testing.T) string {
	t.Helper()
	path := filepath.Join("..", "webcheck", "node_modules", "axe-core", "axe.min.js")
	src, err := os.ReadFile(path)
	require.NoError(t, err, "axe-core is not installed: run `make test-deps` (npm ci in deploy/tools/webcheck)")
	return string(src)
}

// emulate shows the page in a view: its color scheme and its screen.
func (b *browser) emulate(v a11yView) {
	b.t.Helper()
	b.do("emulate "+v.scheme+" "+v.size, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		media := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v.scheme}}}
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, media)
		return err
	}), chromedp.EmulateViewport(v.width, v.height, func(p *emulation.SetDeviceMetricsOverrideParams, _ *emulation.SetTouchEmulationEnabledParams) {
		p.Mobile = v.mobile
	}))
}

// axeViolation is one rule broken, with the elements that break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  string `json:"target"`
		Summary string `json:"summary"`
	} `json:"nodes"`
}

// axeRun is axe.run over the document with axeTags, answering the serious
// and critical violations only, as JSON.
var axeRun = `(async () => {
  const r = await axe.run(document, { runOnly: { type: 'tag', values: %s }, resultTypes: ['violations'] });
  return JSON.stringify(r.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target.join(' '), summary: n.failureSummary })) })));
})()`

// checkA11y looks at the page's present state in each of views (every view
// when none is given): a screenshot named state-scheme-size, and axe's
// serious and critical violations, each a line of the answer (none: the
// state passes).
func (b *browser) checkA11y(state, axeJS string, views ...a11yView) []string {
	b.t.Helper()
	if b.eval(`typeof window.axe`) != "object" {
		b.eval(axeJS + ";'loaded'")
	}
	tags, err := json.Marshal(axeTags)
	require.NoError(b.t, err)
	if len(views) == 0 {
		views = a11yViews
	}
	var problems []string
	for _, v := range views {
		b.emulate(v)
		name := fmt.Sprintf("%s-%s-%s", state, v.scheme, v.size)
		b.screenshot(name)
		out, err := chromedp.Run(b.timeout(30*time.Second), chromedp.Evaluate[string](fmt.Sprintf(axeRun, tags), chromedp.EvalAwaitPromise))
		if err != nil {
			b.fail("axe.run in "+name, err)
		}
		var found []axeViolation
		require.NoError(b.t, json.Unmarshal([]byte(out), &found))
		for _, f := range found {
			for _, n := range f.Nodes {
				problems = append(problems, fmt.Sprintf("%s: %s (%s) at %s: %s", name, f.ID, f.Impact, n.Target,
					strings.ReplaceAll(n.Summary, "\n", " ")))
			}
		}
	}
	b.emulate(a11yViews[0])
	return problems
}

// focusShown is the JavaScript that says how the focused element is seen:
// "ok" when it wears a focus ring (an outline of 2 px or more, or a box
// shadow, on itself or, for a radio drawn by its label, on the label's
// text), else what it is.
const focusShown = `(() => {
  const el = document.activeElement;
  if (!el || el === document.body) return 'nothing focused';
  const ring = (x) => { const cs = getComputedStyle(x);
    return (cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2) || cs.boxShadow !== 'none'; };
  if (ring(el) || (el.nextElementSibling && ring(el.nextElementSibling))) return 'ok';
  const cs = getComputedStyle(el);
  return 'no focus ring (' + [el.matches(':focus'), el.matches(':focus-within'), el.matches(':focus-visible'), cs.outlineStyle, cs.outlineWidth, cs.boxShadow].join(' ') + '): ' + el.outerHTML.slice(0, 120);
})()`

// press sends one key (kb.Tab, kb.Enter, " ", ...), with Shift when shift,
// to whatever has the focus, as a keyboard does.
func (b *browser) press(key string, shift bool) {
	b.t.Helper()
	var opts []chromedp.KeyOption
	if shift {
		opts = append(opts, chromedp.KeyModifiers(chromedp.ModifierShift))
	}
	b.do("press "+strings.NewReplacer("\t", "Tab", "\r", "Enter", " ", "Space").Replace(key), chromedp.KeyEvent(key, opts...))
}

// typeKeys types text into the focused field, key by key.
func (b *browser) typeKeys(text string) {
	b.t.Helper()
	b.do("type "+text, chromedp.KeyEvent(text))
}

// tabTo presses Tab (Shift-Tab when back) until the focus is on the element
// selected by css, at most max times, checking after every press that the
// focus is visible. It fails when the element is never reached.
func (b *browser) tabTo(css string, back bool, max int) {
	b.t.Helper()
	is := fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, css)
	for range max {
		b.press(kb.Tab, back)
		require.Equal(b.t, "ok", b.eval(focusShown), "tabbing to %s", css)
		if b.eval(is) == "true" {
			return
		}
	}
	b.fail("tab to "+css, fmt.Errorf("not reached in %d presses; the focus is on %s", max,
		b.eval(`document.activeElement.outerHTML.slice(0, 120)`)))
}

// tabAround presses Tab until the focus comes back to the first element
// it stopped on (by way of the browser's own controls past the page's end),
// checking at each stop that the focus is seen; it answers how many
// stops the page has.
func (b *browser) tabAround() int {
	b.t.Helper()
	b.eval(`window.__firstStop = null`)
	stops := 0
	for range 300 {
		b.press(kb.Tab, false)
		switch b.eval(`(() => { const a = document.activeElement;
			if (!a || a === document.body) return 'outside';
			if (a === window.__firstStop) return 'around';
			window.__firstStop = window.__firstStop || a; return 'on'; })()`) {
		case "around":
			return stops
		case "outside":
			continue
		}
		stops++
		require.Equal(b.t, "ok", b.eval(focusShown), "stop %d", stops)
	}
	b.t.Fatal("Tab never came around the page in 300 presses")
	return 0
}
