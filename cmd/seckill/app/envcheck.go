package app

import (
	"io"
	"reflect"
	"strings"
)

// envPrefix starts every variable the project reads.
const envPrefix = "SECKILL_"

// otherTools are the SECKILL_* variables the project's other programs read
// (the load tool, the fault and fleet suites, the Makefile, the browser
// tests), by exact name or, ending in '_', by prefix. The server ignores
// them without a warning: one shell often drives both.
var otherTools = []string{
	"SECKILL_LOADTEST_", "SECKILL_CHAOS", "SECKILL_CHAOS_", "SECKILL_FLEET", "SECKILL_FLEET_",
	"SECKILL_APT_UPDATED", "SECKILL_SCREENSHOTS",
}

// knownVariables are the names of every setting (Config's env tags).
func knownVariables() []string {
	t := reflect.TypeOf(Config{})
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("env"))
	}
	return names
}

// unknownVariables returns, for each SECKILL_* variable of environ
// (NAME=value) that no setting reads, its name and the closest known one: a
// misspelled name would otherwise leave its setting at the default without
// a word.
func unknownVariables(environ []string) [][2]string {
	known := knownVariables()
	isKnown := map[string]bool{}
	for _, n := range known {
		isKnown[n] = true
	}
	var out [][2]string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || isKnown[name] || otherTool(name) {
			continue
		}
		best, bestDist := "", -1
		for _, k := range known {
			if d := editDistance(name, k); bestDist < 0 || d < bestDist {
				best, bestDist = k, d
			}
		}
		out = append(out, [2]string{name, best})
	}
	return out
}

func otherTool(name string) bool {
	for _, o := range otherTools {
		if name == o || (strings.HasSuffix(o, "_") && strings.HasPrefix(name, o)) {
			return true
		}
	}
	return false
}

// warnUnknownVariables logs unknownVariables as warnings at start, in the
// log format the environment asks for (a bad level or format is refused
// right after, by loadConfig).
func warnUnknownVariables(getenv func(string) string, environ []string, stderr io.Writer) {
	unknown := unknownVariables(environ)
	if len(unknown) == 0 {
		return
	}
	log := newLogger(Config{LogLevel: getenv("SECKILL_LOG_LEVEL"), LogFormat: getenv("SECKILL_LOG_FORMAT")}, stderr)
	for _, u := range unknown {
		log.Warn("unknown configuration variable, ignored (see 'seckill env')", "variable", u[0], "did_you_mean", u[1])
	}
}

// editDistance is the Levenshtein distance of a and b (bytes: the names are
// ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
