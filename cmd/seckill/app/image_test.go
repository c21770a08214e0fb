package app

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// instruction is one instruction of a Dockerfile, its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER...
	args string
}

// readDockerfile parses deploy/Dockerfile into its stages' instructions
// (Docker does not run on these machines, so the test reads what the build
// would do). Each stage starts with its FROM.
func readDockerfile(t *testing.T) [][]instruction {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "deploy", "Dockerfile"))
	require.NoError(t, err)
	defer f.Close()
	var stages [][]instruction
	var line strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(text)
		cmd, args, _ := strings.Cut(strings.TrimSpace(line.String()), " ")
		line.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "deploy/Dockerfile: %s before the first FROM", in.cmd)
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, len(stages), 2, "a build stage and the image")
	return stages
}

func find(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// TestImageFacts: the image runs as a numeric, non-root user (Kubernetes'
// runAsNonRoot checks a number, deploy/helm/seckill runs it as that user),
// exposes the shoppers' and the ops port, fixes the ops listener where its
// HEALTHCHECK, the chart's probes and Prometheus ask, checks its health
// with its own subcommand (no curl in it), and is stamped with the commit
// passed as a build argument.
func TestImageFacts(t *testing.T) {
	stages := readDockerfile(t)
	build, image := stages[0], stages[len(stages)-1]

	users := find(image, "USER")
	require.Len(t, users, 1)
	uid, gid, _ := strings.Cut(users[0], ":")
	for _, id := range []string{uid, gid} {
		n, err := strconv.Atoi(id)
		require.NoError(t, err, "USER %s: a number, not a name", users[0])
		require.Positive(t, n, "USER %s: not root", users[0])
	}

	env := map[string]string{}
	for _, e := range find(image, "ENV") {
		for kv := range strings.FieldsSeq(e) {
			k, v, ok := strings.Cut(kv, "=")
			require.True(t, ok, "ENV %s: NAME=value", e)
			env[k] = v
		}
	}
	cfg, err := LoadConfig(func(k string) string { return env[k] })
	require.NoError(t, err, "the image's ENV is a valid configuration")
	probeAddr, err := cfg.opsProbeAddr()
	require.NoError(t, err, "a healthcheck in the image finds the ops listener")
	_, opsPort, err := net.SplitHostPort(probeAddr)
	require.NoError(t, err)
	_, httpPort, err := net.SplitHostPort(cfg.HTTPAddr)
	require.NoError(t, err)
	exposed := strings.Fields(strings.Join(find(image, "EXPOSE"), " "))
	require.Contains(t, exposed, opsPort, "the ops port is EXPOSEd")
	require.Contains(t, exposed, httpPort, "the shoppers' port is EXPOSEd")

	health := find(image, "HEALTHCHECK")
	require.Len(t, health, 1)
	_, cmd, ok := strings.Cut(health[0], "CMD ")
	require.True(t, ok, "HEALTHCHECK ... CMD [...]: %s", health[0])
	require.True(t, strings.HasPrefix(strings.TrimSpace(cmd), `["seckill", "healthcheck"`), "the exec form, no shell in the image: %s", cmd)
	_, _, err = runCLI(t, []string{"healthcheck", "-h"}, func(string) string { return "" })
	require.NoError(t, err, "the binary has the subcommand the HEALTHCHECK runs")

	require.Contains(t, find(build, "ARG"), `COMMIT=""`, "the commit comes as a build argument")
	var goBuild string
	for _, r := range find(build, "RUN") {
		if strings.Contains(r, "go build") {
			goBuild = r
		}
	}
	require.Regexp(t, regexp.MustCompile(`-X main\.commit=\$\{?COMMIT\}?`), goBuild, "the build stamps the commit for `seckill version`")
	require.Equal(t, []string{`["seckill"]`}, find(image, "ENTRYPOINT"))
}

// dockerignored reports whether a .dockerignore pattern leaves path (slash
// separated, relative to the context) out, as Docker matches: a pattern
// matches the path or a folder it is in; "**/" matches any depth.
func dockerignored(patterns []string, path string) bool {
	parts := strings.Split(path, "/")
	ignored := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimSuffix(strings.TrimPrefix(p, "!"), "/")
		match := false
		for i := range parts {
			prefix := strings.Join(parts[:i+1], "/")
			if ok, _ := filepath.Match(p, prefix); ok {
				match = true
			}
			if rest, ok := strings.CutPrefix(p, "**/"); ok {
				for j := 0; j <= i; j++ {
					if ok, _ := filepath.Match(rest, strings.Join(parts[j:i+1], "/")); ok {
						match = true
					}
				}
			}
		}
		if match {
			ignored = !neg
		}
	}
	return ignored
}

// TestDockerignore: the build context leaves out the history, what builds
// and dev mode leave behind (bin/, .run/ with dev mode's generated
// secrets) and secrets files, and keeps every file the image's build needs.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", ".dockerignore"))
	require.NoError(t, err, ".dockerignore at the top, beside the build's context")
	var patterns []string
	for l := range strings.Lines(string(raw)) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, out := range []string{".git", ".git/HEAD", "bin/seckill", "bin/helm", ".run/dev.env", ".run/pg/postmaster.pid", ".env", "deploy/x.env", "gateway/gateway.test"} {
		require.True(t, dockerignored(patterns, out), "%s is sent to the Docker build", out)
	}
	for _, in := range []string{"go.mod", "go.sum", "cmd/seckill/main.go", "migrations/001_schema.sql", "lua/reserve.lua", "web/index.html", "gateway/openapi.yaml"} {
		_, err := os.Stat(filepath.Join("..", "..", "..", in))
		require.NoError(t, err, "%s exists", in)
		require.False(t, dockerignored(patterns, in), "%s is needed by the build and left out", in)
	}
}
