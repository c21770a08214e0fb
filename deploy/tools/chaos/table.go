package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable prints the results as a Markdown table, the one deploy/tools/chaos/README.md
// shows: per fault, the accepted orders (202), how they ended in
// PostgreSQL, and how long the system took to heal by itself.
func WriteTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| fault | accepted | persisted | failed | unknown | oversold | seconds to heal | seconds to settle | invariants |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s |\n", r.Fault, r.Accepted, r.Persisted, r.Failed,
			r.Unknown, r.oversold(), seconds(r.Healed, r.Heal), seconds(r.Settled && r.Drift == "", r.Settle), r.verdict())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteOutcomeTable prints the results as the Markdown table of
// deploy/tools/netlab/README.md, from the shoppers' side: the orders accepted
// (202); of those, how many PostgreSQL persisted, how many it has no final
// status for, and how many ended failed (a shopper promised and let
// down); the shoppers turned away without an order by the fault; and how
// slow the buys were.
func WriteOutcomeTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| fault | accepted | persisted | failed | unknown | accepted then failed | oversold | seconds to heal | buy p99 | invariants |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---:|---:|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %s | %s | %.0f ms | %s |\n", r.Fault, r.Accepted, r.Persisted,
			r.TurnedAway, r.Unknown, r.Failed, r.oversold(), seconds(r.Healed, r.Heal), float64(r.BuyP99.Microseconds())/1000, r.verdict())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r Result) oversold() string {
	if r.Sold > r.Total {
		return fmt.Sprintf("**yes** (%d of %d)", r.Sold, r.Total)
	}
	return "no"
}

func (r Result) verdict() string {
	if len(r.Problems) > 0 {
		return fmt.Sprintf("**%d broken**", len(r.Problems))
	}
	return "hold"
}

// Broken lists what a result says went wrong: nothing accepted, a broken
// invariant, an accepted order that never ended, Redis and PostgreSQL not
// agreeing again by themselves, a count that does not add up. Empty means
// the sale came through the fault whole.
func (r Result) Broken() []string {
	var out []string
	if r.Accepted == 0 {
		out = append(out, "the crowd bought nothing")
	}
	out = append(out, r.Problems...)
	if !r.Settled {
		out = append(out, "not every accepted order ended (or Redis and PostgreSQL did not agree) in time")
	}
	if r.Drift != "" {
		out = append(out, r.Drift)
	}
	if !r.Healed {
		out = append(out, "Redis and PostgreSQL never agreed again without an operator")
	}
	if r.Sold > r.Total {
		out = append(out, fmt.Sprintf("sold %d of %d", r.Sold, r.Total))
	}
	if r.Accepted != r.Persisted+r.Failed+r.Unknown {
		out = append(out, fmt.Sprintf("accepted %d != persisted %d + failed %d + unknown %d", r.Accepted, r.Persisted, r.Failed, r.Unknown))
	}
	return out
}

// seconds shows a measured duration, or that it never happened.
func seconds(ok bool, d time.Duration) string {
	if !ok {
		return "not healed by itself"
	}
	return fmt.Sprintf("%.1f", d.Seconds())
}
