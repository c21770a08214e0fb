package netlab

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/seckill/deploy/tools/chaos"
)

// span is the buys sent within a stretch of time.
type span struct {
	all      []chaos.Answer
	from, to time.Time
}

// window is the answers to the buys sent from from until to.
func window(answers []chaos.Answer, from, to time.Time) span {
	s := span{from: from, to: to}
	for _, a := range answers {
		if !a.At.Before(from) && a.At.Before(to) {
			s.all = append(s.all, a)
		}
	}
	return s
}

func (s span) filter(keep func(chaos.Answer) bool) span {
	out := span{from: s.from, to: s.to}
	for _, a := range s.all {
		if keep(a) {
			out.all = append(out.all, a)
		}
	}
	return out
}

// of is the summary of gateway gw's answers, except of the others'.
func (s span) of(gw int) string {
	return s.filter(func(a chaos.Answer) bool { return a.Gateway == gw }).summary()
}

func (s span) except(gw int) string {
	return s.filter(func(a chaos.Answer) bool { return a.Gateway != gw }).summary()
}

// summary says how many answers of each kind, how many 202s a second, and
// how long the answers took.
func (s span) summary() string {
	if len(s.all) == 0 {
		return "no buys"
	}
	byLabel := map[string]int{}
	for _, a := range s.all {
		byLabel[a.Label]++
	}
	secs := s.to.Sub(s.from).Seconds()
	return fmt.Sprintf("%s; %.0f accepted a second; answered in p50 %s, p99 %s, max %s",
		counts(byLabel), float64(byLabel["202"])/secs,
		ms(chaos.Percentile(s.all, 0.5)), ms(chaos.Percentile(s.all, 0.99)), ms(chaos.Percentile(s.all, 1)))
}

// counts is "202×12 503×3".
func counts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"×"+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
}
