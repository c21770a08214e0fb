package prometheus_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// awaited are metrics a rule reads that another part of the system adds in
// the same release (the healer's); they are not required to be served yet.
var awaited = map[string]bool{"seckill_heal_failures_total": true}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	require.NoError(t, err, "promtool is missing: `make test` installs it (Debian package prometheus)")
	out, err := exec.Command(bin, args...).CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
	out := promtool(t, "test", "rules", "alerts_test.yml")
	require.Contains(t, out, "SUCCESS")
	// The scrape configuration loads these rules (docker-compose mounts
	// them beside it).
	require.Contains(t, promtool(t, "check", "config", "../prometheus.yml"), "SUCCESS: 25 rules found")
}

// ruleFile is alerts.yml as these tests read it.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// Every alert has at least one test that expects it to fire and one that
// expects it silent; every metric a rule reads is served.
func TestEveryRuleIsTested(t *testing.T) {
	var rules ruleFile
	readYAML(t, "alerts.yml", &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, "alerts_test.yml", &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	served := servedMetrics(t)
	metric := regexp.MustCompile(`seckill_[a-z_]+`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				n++
				require.True(t, fires[r.Alert], "rule %s has no test in which it fires", r.Alert)
				require.True(t, silent[r.Alert], "rule %s has no test in which it stays silent", r.Alert)
			}
			for _, name := range metric.FindAllString(r.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
				if awaited[base] && !served[base] {
					t.Logf("rule %s reads %s, which the code does not serve yet", r.Alert, base)
					continue
				}
				require.True(t, served[base], "rule %s reads %s, which no code serves (renamed?)", r.Alert, base)
			}
		}
	}
	require.Equal(t, 17, n)
}

// Every alert links its runbook: a section of deploy/OPERATING.md whose
// heading is the alert's name (GitHub's anchor of it), which exists.
func TestEveryAlertHasARunbook(t *testing.T) {
	var rules ruleFile
	readYAML(t, "alerts.yml", &rules)
	doc, err := os.ReadFile("../OPERATING.md")
	require.NoError(t, err)
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{2,6} +(.+?)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	const prefix = "https://github.com/flashsale/seckill/blob/main/deploy/OPERATING.md#"
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, prefix)
			require.True(t, ok, "%s: runbook_url %q is not a section of deploy/OPERATING.md", r.Alert, url)
			require.Equal(t, strings.ToLower(r.Alert), anchor, "%s: its runbook is the section named after it", r.Alert)
			require.True(t, anchors[anchor], "%s: deploy/OPERATING.md has no heading %q (its runbook)", r.Alert, r.Alert)
		}
	}
	require.Positive(t, n)
}

// githubAnchor is the fragment GitHub gives a Markdown heading: lower
// case, punctuation dropped, spaces made hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, v))
}

// servedMetrics are the seckill_ names in the repository's Go code (tests
// excluded): what GET /metrics can serve.
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	quoted := regexp.MustCompile(`"(seckill_[a-z_]+)"`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".run" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range quoted.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	require.NoError(t, err)
	return names
}
