package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// dashboardsDir holds the Grafana dashboards deploy/grafana provisions.
var dashboardsDir = filepath.Join("..", "..", "..", "deploy", "grafana", "dashboards")

// offPanelFile lists the served families deliberately on no panel, each
// with its reason.
var offPanelFile = filepath.Join("..", "..", "..", "deploy", "grafana", "not-on-a-panel.yml")

// servedFamilies are the metric families a process of every role
// registers, read from its registry (Describe): every family it can
// serve on /metrics, also those with no series yet.
func servedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{
			"SECKILL_REDIS_URL": stack.RedisURL, "SECKILL_DATABASE_URL": stack.NewDatabaseURL(t),
			"SECKILL_KAFKA_BROKERS": strings.Join(stack.KafkaBrokers, ","), "SECKILL_KAFKA_TOPIC": stack.NewTopic(t, 1),
			"SECKILL_ROLES": "gateway,worker,sweeper", "SECKILL_JWT_SECRET": "dashboard-test-secret-0123456789abcdefghij",
			"SECKILL_ADMIN_TOKEN": "dashboard-test-admin",
		}[k]
	})
	require.NoError(t, err)
	sys, err := NewSystem(t.Context(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(sys.Close)

	descs := make(chan *prometheus.Desc)
	go func() {
		sys.registry.Describe(descs)
		close(descs)
	}()
	// A Desc tells its name only in its String (client_golang keeps the
	// field unexported): Desc{fqName: "name", ...}.
	name := regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	served := map[string]bool{}
	for d := range descs {
		m := name.FindStringSubmatch(d.String())
		require.NotNil(t, m, "a Desc without a name: %s", d)
		served[m[1]] = true
	}
	require.Greater(t, len(served), 40)
	return served
}

// panelQueries are the queries of every panel of every dashboard, and the
// file each is in.
func panelQueries(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string][]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var d struct {
			Panels []dashPanel `json:"panels"`
		}
		require.NoError(t, json.Unmarshal(raw, &d), f)
		var walk func([]dashPanel)
		walk = func(ps []dashPanel) {
			for _, p := range ps {
				for _, tg := range p.Targets {
					out[filepath.Base(f)] = append(out[filepath.Base(f)], tg.Expr)
				}
				walk(p.Panels) // a collapsed row keeps its panels inside
			}
		}
		walk(d.Panels)
	}
	return out
}

type dashPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// metricNames are the metric names a query reads (a histogram's _bucket,
// _sum and _count read its family), leaving out recording rules (they have
// a colon) and the query language's words.
func metricNames(expr string) []string {
	return regexp.MustCompile(`\b(seckill|go|process|promhttp)_[a-zA-Z0-9_]+`).FindAllString(expr, -1)
}

// familyOf is the family a sample name belongs to among served.
func familyOf(name string, served map[string]bool) (string, bool) {
	if served[name] {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && served[base] {
			return base, true
		}
	}
	return "", false
}

// TestEveryServedFamilyIsOnAPanel: every metric family a process serves is
// read by a panel of a Grafana dashboard (deploy/grafana/dashboards), or is
// listed, with its reason, in deploy/grafana/not-on-a-panel.yml; every
// seckill_ name a panel reads is served (a renamed metric leaves an empty
// panel); and the list names no family the process does not serve.
func TestEveryServedFamilyIsOnAPanel(t *testing.T) {
	served := servedFamilies(t)

	raw, err := os.ReadFile(offPanelFile)
	require.NoError(t, err)
	var off map[string]string
	require.NoError(t, yaml.Unmarshal(raw, &off), offPanelFile)
	for pattern, reason := range off {
		require.NotEmpty(t, strings.TrimSpace(reason), "deploy/grafana/not-on-a-panel.yml: %s has no reason", pattern)
		matched := false
		for f := range served {
			ok, err := path.Match(pattern, f)
			require.NoError(t, err, pattern)
			matched = matched || ok
		}
		require.True(t, matched, "deploy/grafana/not-on-a-panel.yml lists %s, which no process serves: remove it", pattern)
	}

	onPanel := map[string]bool{}
	for file, exprs := range panelQueries(t) {
		for _, e := range exprs {
			for _, n := range metricNames(e) {
				fam, ok := familyOf(n, served)
				require.True(t, ok, "deploy/grafana/dashboards/%s reads %s, which no process serves (renamed? removed?): %s", file, n, e)
				onPanel[fam] = true
			}
		}
	}

	var missing []string
	for f := range served {
		if onPanel[f] {
			continue
		}
		listed := false
		for pattern := range off {
			ok, _ := path.Match(pattern, f)
			listed = listed || ok
		}
		if !listed {
			missing = append(missing, f)
		}
	}
	slices.Sort(missing)
	for _, f := range missing {
		t.Errorf("%s is served but on no panel: add a panel that reads it to the row of its feature in "+
			"deploy/grafana/dashboards/flash-sale.json (a timeseries with a `rate(%s[$__rate_interval])` "+
			"or gauge query, `instance=~\"$instance\"` in its selector), or list it with the reason it is "+
			"left off in deploy/grafana/not-on-a-panel.yml", f, f)
	}
	t.Logf("%d families served, %d on a panel, %d listed off panel", len(served), len(onPanel), len(served)-len(onPanel))
}

// TestDashboardsFollowTheirVariables: each dashboard lets the reader pick
// the data source and the instances, and every panel obeys: its queries
// go to $datasource, and every selector of a served metric keeps to
// $instance (a panel that ignored it would mix the instances the reader
// left out into its figures).
func TestDashboardsFollowTheirVariables(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	selector := regexp.MustCompile(`\b(?:seckill|go|process)_[a-zA-Z0-9_]+(\{[^}]*\})?`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var d struct {
			Templating struct {
				List []struct {
					Name, Type string
				} `json:"list"`
			} `json:"templating"`
			Panels []struct {
				Type       string `json:"type"`
				Title      string `json:"title"`
				Datasource struct {
					UID string `json:"uid"`
				} `json:"datasource"`
				Targets []struct {
					Expr       string `json:"expr"`
					Datasource struct {
						UID string `json:"uid"`
					} `json:"datasource"`
				} `json:"targets"`
			} `json:"panels"`
		}
		require.NoError(t, json.Unmarshal(raw, &d), f)
		vars := map[string]string{}
		for _, v := range d.Templating.List {
			vars[v.Name] = v.Type
		}
		require.Equal(t, "datasource", vars["datasource"], "%s: a data source variable", f)
		require.Equal(t, "query", vars["instance"], "%s: an instance variable", f)
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			require.Equal(t, "${datasource}", p.Datasource.UID, "%s: panel %q", f, p.Title)
			for _, tg := range p.Targets {
				require.Equal(t, "${datasource}", tg.Datasource.UID, "%s: panel %q", f, p.Title)
				for _, m := range selector.FindAllStringSubmatch(tg.Expr, -1) {
					require.Contains(t, m[1], `instance=~"$instance"`, "%s: panel %q reads %s across every instance: %s", f, p.Title, m[0], tg.Expr)
				}
			}
		}
	}
}
