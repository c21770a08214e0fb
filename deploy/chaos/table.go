package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints the results as a Markdown table, the one deploy/chaos/README.md
// shows: per fault, the accepted orders (202), how they ended in
// PostgreSQL, and how long the system took to heal by itself.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| fault | accepted | persisted | failed | unknown | oversold | seconds to heal | seconds to settle | invariants |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---|\n")
	for _, r := range results {
		oversold := "no"
		if r.Sold > r.Total {
			oversold = fmt.Sprintf("**yes** (%d of %d)", r.Sold, r.Total)
		}
		verdict := "hold"
		if len(r.Problems) > 0 {
			verdict = fmt.Sprintf("**%d broken**", len(r.Problems))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s |\n", r.Fault, r.Accepted, r.Persisted, r.Failed,
			r.Unknown, oversold, seconds(r.Healed, r.Heal), seconds(r.Settled && r.Drift == "", r.Settle), verdict)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seconds shows a measured duration, or that it never happened.
func seconds(ok bool, d time.Duration) string {
	if !ok {
		return "not healed by itself"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}
