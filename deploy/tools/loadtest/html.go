package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// outcomeColor gives every outcome the same colour in every chart.
func outcomeColor(o Outcome) string {
	switch o {
	case OutcomeAccepted:
		return "#2e7d32"
	case OutcomeSoldOut:
		return "#1565c0"
	case OutcomeLimitExceeded:
		return "#6a1b9a"
	case OutcomeRateLimited:
		return "#ef6c00"
	case OutcomeUnavailable:
		return "#c62828"
	case OutcomeNotStarted:
		return "#8d6e63"
	}
	return "#212121"
}

// svgChart is one chart, laid out in Go: the template only prints it.
type svgChart struct {
	Name, Title, XLabel, YLabel string
	// W, H is the viewBox; L, T, PW, PH the plot area inside it.
	W, H, L, T, PW, PH float64
	XTicks, YTicks     []svgTick
	Series             []svgSeries
	LegendY            float64
}

type svgTick struct {
	Pos   float64
	Label string
}

type svgSeries struct {
	Name, Color, Dash, D string
	// LegendX is where the series' legend entry starts.
	LegendX float64
}

// series is one line of a chart before layout: a value per bucket, NaN where
// there is nothing to draw.
type series struct {
	name, color, dash string
	values            []float64
}

// layoutChart scales the series into a chart. Values are drawn as steps, one
// flat segment per bucket, which is what bucketed data honestly is, and
// empty buckets break the line.
func layoutChart(name, title, yLabel string, bucketMS float64, n int, ss []series) svgChart {
	c := svgChart{
		Name: name, Title: title, XLabel: "seconds since the opening", YLabel: yLabel,
		W: 900, H: 330, L: 70, T: 20, PW: 800, PH: 230,
	}
	c.LegendY = c.T + c.PH + 52
	xMax := float64(n) * bucketMS / 1000
	yMax := 0.0
	for _, s := range ss {
		for _, v := range s.values {
			if !math.IsNaN(v) {
				yMax = max(yMax, v)
			}
		}
	}
	xStep, xTop := niceScale(xMax, 10)
	yStep, yTop := niceScale(yMax, 5)
	x := func(sec float64) float64 { return c.L + sec/xTop*c.PW }
	y := func(v float64) float64 { return c.T + c.PH - v/yTop*c.PH }
	for v := 0.0; v <= xTop+xStep/2; v += xStep {
		c.XTicks = append(c.XTicks, svgTick{Pos: x(v), Label: trimFloat(v)})
	}
	for v := 0.0; v <= yTop+yStep/2; v += yStep {
		c.YTicks = append(c.YTicks, svgTick{Pos: y(v), Label: trimFloat(v)})
	}
	legendX := c.L
	for _, s := range ss {
		var d strings.Builder
		open := false
		for i, v := range s.values {
			if math.IsNaN(v) {
				open = false
				continue
			}
			x0, x1 := x(float64(i)*bucketMS/1000), x(float64(i+1)*bucketMS/1000)
			if open {
				fmt.Fprintf(&d, "L%.1f %.1f", x0, y(v))
			} else {
				fmt.Fprintf(&d, "M%.1f %.1f", x0, y(v))
				open = true
			}
			fmt.Fprintf(&d, "L%.1f %.1f", x1, y(v))
		}
		if d.Len() == 0 {
			continue
		}
		c.Series = append(c.Series, svgSeries{Name: s.name, Color: s.color, Dash: s.dash, D: d.String(), LegendX: legendX})
		legendX += 30 + 7.5*float64(len(s.name)) + 20
	}
	return c
}

// niceScale picks a round step (1, 2, 2.5 or 5 × 10^k) giving about n ticks
// up to at least v, and the top of the axis.
func niceScale(v float64, n int) (step, top float64) {
	if v <= 0 || math.IsNaN(v) {
		return 1, 1
	}
	raw := v / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step, math.Ceil(v/step-1e-9) * step
}

func trimFloat(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// charts builds the latency-over-time and throughput-over-time charts.
func charts(rep Report) []svgChart {
	n := len(rep.Timeline)
	if n == 0 || rep.BucketMS <= 0 {
		return nil
	}
	pick := func(f func(LatencyStats) float64) []float64 {
		out := make([]float64, n)
		for i, b := range rep.Timeline {
			out[i] = math.NaN()
			if b.Latency.Count > 0 {
				out[i] = f(b.Latency)
			}
		}
		return out
	}
	latency := layoutChart("latency", "Latency over time (by when the request was sent)", "ms", rep.BucketMS, n, []series{
		{name: "max", color: "#9e9e9e", dash: "4 3", values: pick(func(l LatencyStats) float64 { return l.MaxMS })},
		{name: "p99", color: "#c62828", values: pick(func(l LatencyStats) float64 { return l.P99MS })},
		{name: "p90", color: "#ef6c00", values: pick(func(l LatencyStats) float64 { return l.P90MS })},
		{name: "p50", color: "#1565c0", values: pick(func(l LatencyStats) float64 { return l.P50MS })},
	})

	perSec := 1000 / rep.BucketMS
	sent := make([]float64, n)
	for i, b := range rep.Timeline {
		sent[i] = float64(b.Sent) * perSec
	}
	ss := []series{{name: "sent", color: "#9e9e9e", dash: "4 3", values: sent}}
	for _, o := range Outcomes() {
		if rep.Outcomes[o] == 0 {
			continue
		}
		vals := make([]float64, n)
		for i, b := range rep.Timeline {
			vals[i] = float64(b.Answers[o]) * perSec
		}
		ss = append(ss, series{name: string(o), color: outcomeColor(o), values: vals})
	}
	throughput := layoutChart("throughput", "Throughput over time (answers per second, by outcome)", "per second", rep.BucketMS, n, ss)
	return []svgChart{latency, throughput}
}

// htmlOutcome is one row of the outcomes table.
type htmlOutcome struct {
	Name, Share string
	// Color is a constant of outcomeColor, so it may go into a style
	// attribute unescaped.
	Color template.CSS
	Count int
	Lat   LatencyStats
}

// WriteHTML writes rep as one self-contained page: the figures, the checks,
// and a latency-over-time and a throughput-over-time chart as inline SVG. It
// loads nothing: no scripts, fonts, styles or images from elsewhere.
func WriteHTML(w io.Writer, rep Report) error {
	tmpl, err := template.New("report").Funcs(template.FuncMap{
		"ms":   fmtMS,
		"add":  func(a, b float64) float64 { return a + b },
		"half": func(v float64) float64 { return v / 2 },
		"more": func(c Check) int { return c.ProblemCount - len(c.Problems) },
		"time": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"pct":  func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) },
		"deref": func(p *int64) string {
			if p == nil {
				return "unknown"
			}
			return strconv.FormatInt(*p, 10)
		},
		"derefMS": func(p *float64) string {
			if p == nil {
				return "not sold out"
			}
			return fmtMS(*p)
		},
	}).Parse(htmlPage)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	var rows []htmlOutcome
	for _, o := range Outcomes() {
		n := rep.Outcomes[o]
		share := "0%"
		if rep.Sent > 0 {
			share = fmt.Sprintf("%.1f%%", float64(n)/float64(rep.Sent)*100)
		}
		rows = append(rows, htmlOutcome{Name: string(o), Color: template.CSS(outcomeColor(o)), Share: share, Count: n, Lat: rep.Latency[string(o)]})
	}
	data := struct {
		R        Report
		Outcomes []htmlOutcome
		All      LatencyStats
		Charts   []svgChart
	}{rep, rows, rep.Latency["all"], charts(rep)}
	if err := tmpl.Execute(w, data); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	return nil
}

const htmlPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Flash sale load test: voucher {{.R.VoucherID}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 960px; color: #212121; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { padding: .25em .8em; border-bottom: 1px solid #e0e0e0; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.l { text-align: left; }
.verdict { display: inline-block; padding: .2em .7em; border-radius: 4px; color: #fff; font-weight: 600; }
.pass { background: #2e7d32; } .fail { background: #c62828; }
.swatch { display: inline-block; width: .8em; height: .8em; border-radius: 2px; margin-right: .4em; vertical-align: -1px; }
svg.chart { width: 100%; height: auto; background: #fafafa; border: 1px solid #e0e0e0; }
svg.chart text { font: 12px system-ui, sans-serif; fill: #424242; }
.muted { color: #757575; }
ul.problems { margin: .2em 0 .4em; color: #c62828; }
</style>
</head>
<body>
<h1>Flash sale: voucher {{.R.VoucherID}} <span class="verdict {{if .R.Passed}}pass{{else}}fail{{end}}">{{if .R.Passed}}PASSED{{else}}FAILED{{end}}</span></h1>
<p class="muted">{{.R.BaseURL}} · {{.R.Kind}} · stock {{.R.Stock}} · limit {{.R.PerUserLimit}} per user · opened {{time .R.OpensAt}} (server clock) · seed {{.R.Seed}}</p>

<table>
<tr><th>Crowd</th><td class="l">{{.R.Shoppers}} shoppers × {{.R.Attempts}} attempts, concurrency {{.R.Concurrency}}{{if .R.TargetRate}}, paced at {{.R.TargetRate}}/s{{end}}, quantities {{.R.Quantities}}, replays {{pct .R.ReplayShare}}</td></tr>
<tr><th>Sent</th><td class="l">{{.R.Sent}} of {{.R.Planned}} ({{.R.ReplaysSent}} replays) in {{ms .R.ElapsedMS}}: <b>{{printf "%.0f" .R.RequestsPerSecond}} requests/s</b></td></tr>
<tr><th>Sold out after</th><td class="l">{{derefMS .R.SoldOutAfterMS}}</td></tr>
<tr><th>Sold</th><td class="l">{{.R.Sold}} of {{.R.Stock}}, stock_left {{deref .R.StockLeft}}; accepted {{.R.AcceptedUnits}} units in {{.R.AcceptedOrders}} orders</td></tr>
<tr><th>Persistence</th><td class="l">{{.R.Persist.Persisted}} of {{.R.Persist.Orders}} within {{ms .R.Persist.WaitedMS}}{{if .R.Persist.Delay.Count}}; 202 → created p50 {{ms .R.Persist.Delay.P50MS}}, p99 {{ms .R.Persist.Delay.P99MS}}, max {{ms .R.Persist.Delay.MaxMS}} (by {{.R.Persist.Method}}){{end}}</td></tr>
<tr><th>Clock</th><td class="l">offset {{printf "%+.1f" .R.Clock.OffsetMS}} ms, {{.R.Clock.Method}}; crowd released {{ms .R.ReleaseLateMS}} after the opening on {{.R.WarmConnections}} warm connections</td></tr>
</table>

<h2>Answers</h2>
<table>
<tr><th>outcome</th><th>count</th><th>share</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{{range .Outcomes}}<tr><td><span class="swatch" style="background: {{.Color}}"></span>{{.Name}}</td><td>{{.Count}}</td><td>{{.Share}}</td>{{if .Count}}<td>{{ms .Lat.P50MS}}</td><td>{{ms .Lat.P90MS}}</td><td>{{ms .Lat.P99MS}}</td><td>{{ms .Lat.MaxMS}}</td>{{else}}<td></td><td></td><td></td><td></td>{{end}}</tr>
{{end}}<tr><th>all</th><th>{{.R.Sent}}</th><th>100%</th><th>{{ms .All.P50MS}}</th><th>{{ms .All.P90MS}}</th><th>{{ms .All.P99MS}}</th><th>{{ms .All.MaxMS}}</th></tr>
</table>
{{if .R.Errors}}<p>Errors: {{range $k, $v := .R.Errors}}{{$k}} ×{{$v}}; {{end}}</p>{{end}}

{{range .Charts}}
<h2>{{.Title}}</h2>
<svg class="chart" data-chart="{{.Name}}" viewBox="0 0 {{.W}} {{.H}}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{{.Title}}">
<g class="grid" stroke="#e0e0e0" stroke-width="1">
{{- $c := . }}
{{- range .YTicks}}<line x1="{{$c.L}}" x2="{{$c.L | add $c.PW}}" y1="{{.Pos}}" y2="{{.Pos}}"/>{{end}}
</g>
<g class="axes" stroke="#616161" stroke-width="1"><line x1="{{.L}}" y1="{{.T}}" x2="{{.L}}" y2="{{.T | add .PH}}"/><line x1="{{.L}}" y1="{{.T | add .PH}}" x2="{{.L | add .PW}}" y2="{{.T | add .PH}}"/></g>
{{- range .XTicks}}<text x="{{.Pos}}" y="{{$c.T | add $c.PH | add 16}}" text-anchor="middle">{{.Label}}</text>{{end}}
{{- range .YTicks}}<text x="{{$c.L | add -6}}" y="{{.Pos | add 4}}" text-anchor="end">{{.Label}}</text>{{end}}
<text x="{{.L | add (half .PW)}}" y="{{.T | add .PH | add 34}}" text-anchor="middle">{{.XLabel}}</text>
<text x="16" y="{{.T | add (half .PH)}}" text-anchor="middle" transform="rotate(-90 16 {{.T | add (half .PH)}})">{{.YLabel}}</text>
{{- range .Series}}
<path class="series" data-series="{{.Name}}" d="{{.D}}" fill="none" stroke="{{.Color}}" stroke-width="1.6"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/>
{{- end}}
{{- range .Series}}
<g class="legend"><line x1="{{.LegendX}}" x2="{{.LegendX | add 22}}" y1="{{$c.LegendY}}" y2="{{$c.LegendY}}" stroke="{{.Color}}" stroke-width="3"{{if .Dash}} stroke-dasharray="{{.Dash}}"{{end}}/><text x="{{.LegendX | add 28}}" y="{{$c.LegendY | add 4}}">{{.Name}}</text></g>
{{- end}}
</svg>
{{else}}<p class="muted">No requests were sent: nothing to chart.</p>
{{end}}

<h2>Invariants</h2>
<table>
<tr><th>check</th><th>result</th><th style="text-align:left">detail</th></tr>
{{range .R.Checks}}<tr><td>{{.Name}}</td><td><span class="verdict {{if .OK}}pass{{else}}fail{{end}}">{{if .OK}}ok{{else}}FAIL{{end}}</span></td><td class="l">{{.Detail}}{{if .Problems}}<ul class="problems">{{range .Problems}}<li>{{.}}</li>{{end}}{{with more .}}<li>and {{.}} more</li>{{end}}</ul>{{end}}</td></tr>
{{end}}</table>
</body>
</html>
`
