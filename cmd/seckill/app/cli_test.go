package app

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recordingEnv is an environment that notes every variable read. Its one
// setting makes loadConfig fail at once, so a command that went on to do
// its work after all stops there instead of starting services.
type recordingEnv struct {
	mu   sync.Mutex
	read []string
}

func (e *recordingEnv) getenv(k string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.read = append(e.read, k)
	if k == "SECKILL_KAFKA_PARTITIONS" {
		return "0"
	}
	return ""
}

func (e *recordingEnv) reads() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.read...)
}

// runCLI is the binary's entry with args, as main calls it.
func runCLI(t *testing.T, args []string, getenv func(string) string, environ ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	err = Run(ctx, args, getenv, &out, &errOut, environ...)
	return out.String(), errOut.String(), err
}

// TestHelpPrintsUsageOnly: -h and --help on every subcommand print its usage
// on stdout, exit 0 and do nothing else: no configuration is read, so no
// service is started or dialled (dev used to start the whole system).
func TestHelpPrintsUsageOnly(t *testing.T) {
	for _, cmd := range []string{"dev", "serve", "migrate", "reconcile", "deadletters", "hoard", "operators", "env", "version", "healthcheck", "vapid"} {
		for _, flag := range []string{"-h", "--help"} {
			t.Run(cmd+" "+flag, func(t *testing.T) {
				env := &recordingEnv{}
				stdout, stderr, err := runCLI(t, []string{cmd, flag}, env.getenv)
				require.NoError(t, err, "stderr: %s", stderr)
				require.Equal(t, 0, ExitCode(err))
				require.Contains(t, stdout, "usage: seckill "+cmd, "the usage, on stdout")
				require.Empty(t, stderr, "nothing on stderr")
				require.Empty(t, env.reads(), "help reads no configuration")
			})
		}
	}
	stdout, _, err := runCLI(t, []string{"--help"}, (&recordingEnv{}).getenv)
	require.NoError(t, err)
	require.Contains(t, stdout, "seckill version")
}

// TestUsageErrorsExitTwo: a wrong command line exits 2 with a message and
// the usage on stderr, before anything runs; a failure of the work exits 1.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"env", "--bogus"},
		{"env", "extra"},
		{"dev", "--bogus"},
		{"serve", "extra"},
		{"migrate", "-x"},
		{"version", "--bogus"},
		{"reconcile", "--bogus"},
		{"reconcile", "extra"},
		{"deadletters", "--bogus"},
		{"deadletters"},
		{"deadletters", "drop"},
		{"deadletters", "replay", "zero"},
		{"hoard"},
		{"hoard", "show"},
		{"hoard", "drop", "7"},
		{"hoard", "show", "seven"},
		{"hoard", "clear", "0"},
		{"hoard", "--bogus", "show", "7"},
		{"operators"},
		{"operators", "grant", "alice"},
		{"operators", "add", "alice"},
		{"operators", "add", "alice", "--scope", "admin"},
		{"operators", "add", "root", "--scope", "read"},
		{"operators", "add", "Alice Smith", "--scope", "read"},
		{"operators", "add", "alice", "bob", "--scope", "read"},
		{"operators", "revoke"},
		{"operators", "list", "alice"},
		{"loadtest", "sale"},
		{"healthcheck", "extra"},
		{"vapid", "extra"},
		{"healthcheck", "--path", "/"},
		{"healthcheck", "--timeout", "0s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			env := &recordingEnv{}
			stdout, stderr, err := runCLI(t, args, env.getenv)
			require.Error(t, err)
			require.Equal(t, 2, ExitCode(err), "a usage error: %v", err)
			require.Contains(t, stderr, "seckill: ", "a message on stderr")
			if len(args) == 0 || args[0] != "loadtest" {
				require.Contains(t, stderr, "usage: seckill", "and the usage")
			} else {
				require.Contains(t, stderr, "bin/loadtest", "the load tool's name")
			}
			require.Empty(t, env.reads(), "refused before reading the configuration")
			require.Empty(t, stdout)
		})
	}
	// The command line was right and the configuration was not: exit 1.
	_, _, err := runCLI(t, []string{"migrate"}, (&recordingEnv{}).getenv)
	require.ErrorContains(t, err, "SECKILL_KAFKA_PARTITIONS")
	require.Equal(t, 1, ExitCode(err))
	require.Equal(t, 1, ExitCode(errors.New("any failure")))
}

// TestVersion: `seckill version` and `seckill --version` print what the
// Go toolchain stamped into the binary.
func TestVersion(t *testing.T) {
	bi, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, err := runCLI(t, args, (&recordingEnv{}).getenv)
		require.NoError(t, err)
		require.Empty(t, stderr)
		require.True(t, strings.HasPrefix(stdout, "seckill "+bi.Main.Version+"\n"), "%q", stdout)
		require.Contains(t, stdout, "module  "+bi.Main.Path)
		require.Contains(t, stdout, "commit  ")
		require.Contains(t, stdout, "go      "+bi.GoVersion)
	}
}

// TestVersionNamesTheCommit: the commit is the Go toolchain's stamp when it
// made one, else the one the Makefile's build read from git (with "-dirty"
// said in words), else unknown, with how to get one.
func TestVersionNamesTheCommit(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/flashsale/seckill", Version: "(devel)"}}
	commitLine := func(bi *debug.BuildInfo, b build) string {
		t.Helper()
		text := versionText(bi, true, b)
		require.True(t, strings.HasPrefix(text, "seckill (devel)\nmodule  github.com/flashsale/seckill\n"), "%q", text)
		require.True(t, strings.HasSuffix(text, "\ngo      go1.26.8\n"), "%q", text)
		_, line, ok := strings.Cut(text, "\ncommit  ")
		require.True(t, ok, "%q", text)
		line, _, _ = strings.Cut(line, "\n")
		return line
	}

	require.Equal(t, "b1033be", commitLine(bi, build{commit: "b1033be"}))
	require.Equal(t, "b1033be (with uncommitted changes)", commitLine(bi, build{commit: "b1033be-dirty"}))
	require.Contains(t, commitLine(bi, build{}), "unknown")
	require.Contains(t, commitLine(bi, build{}), "make build", "it says how to get one")

	stamped := *bi
	stamped.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "b1033bed4f6b8b5cc039e4afef2339d345af1b42"},
		{Key: "vcs.time", Value: "2026-12-04T22:29:42Z"}, {Key: "vcs.modified", Value: "true"}}
	require.Equal(t, "b1033bed4f6b8b5cc039e4afef2339d345af1b42 2026-12-04T22:29:42Z (with uncommitted changes)",
		commitLine(&stamped, build{commit: "b1033be"}), "the toolchain's own stamp says more")

	require.Contains(t, versionText(nil, false, build{commit: "b1033be"}), "no build information")
}

// TestUnknownVariablesWarned: a misspelled SECKILL_* variable is named at
// start with the setting it most likely meant; the other tools' variables
// and the real settings are not.
func TestUnknownVariablesWarned(t *testing.T) {
	environ := []string{"SECKILL_USERRATE=5", "SECKILL_GLOBAL_RAT=1", "SECKILL_LOADTEST_URL=http://x", "SECKILL_CHAOS_BIN=/bin/x",
		"SECKILL_USER_RATE=5", "PATH=/bin", "SECKILL_SOMETHING_ELSE=1"}
	env := map[string]string{"SECKILL_USER_RATE": "5"}
	_, stderr, err := runCLI(t, []string{"migrate"}, func(k string) string { return env[k] }, environ...)
	require.ErrorContains(t, err, "migrate needs SECKILL_DATABASE_URL", "the command goes on")
	require.Equal(t, 1, ExitCode(err))
	require.Contains(t, stderr, "variable=SECKILL_USERRATE did_you_mean=SECKILL_USER_RATE")
	require.Contains(t, stderr, "variable=SECKILL_GLOBAL_RAT did_you_mean=SECKILL_GLOBAL_RATE")
	require.Contains(t, stderr, "variable=SECKILL_SOMETHING_ELSE")
	require.Equal(t, 3, strings.Count(stderr, "unknown configuration variable"), "%s", stderr)
	require.NotContains(t, stderr, "SECKILL_LOADTEST_URL")
	require.NotContains(t, stderr, "SECKILL_CHAOS_BIN")

	// In the format asked for.
	env["SECKILL_LOG_FORMAT"] = "json"
	_, stderr, _ = runCLI(t, []string{"serve"}, func(k string) string { return env[k] }, environ...)
	require.Contains(t, stderr, `"variable":"SECKILL_USERRATE","did_you_mean":"SECKILL_USER_RATE"`)
}

// TestBadLogSettingsRefused: a log level or format newLogger does not know
// is refused with what to set, where it used to log at info as text.
func TestBadLogSettingsRefused(t *testing.T) {
	for variable, value := range map[string]string{"SECKILL_LOG_LEVEL": "verbose", "SECKILL_LOG_FORMAT": "xml"} {
		env := map[string]string{variable: value, "SECKILL_DATABASE_URL": "postgres://127.0.0.1:1/x"}
		for _, cmd := range []string{"migrate", "serve", "dev"} {
			_, _, err := runCLI(t, []string{cmd}, func(k string) string { return env[k] })
			require.ErrorContains(t, err, variable+" must be", cmd)
			require.ErrorContains(t, err, `"`+value+`"`, "it quotes the value")
			require.ErrorContains(t, err, "set "+variable+"=", "it says what to set")
		}
	}
	for _, ok := range []map[string]string{
		{"SECKILL_LOG_LEVEL": "DEBUG", "SECKILL_LOG_FORMAT": "JSON"},
		{"SECKILL_LOG_LEVEL": "warn", "SECKILL_LOG_FORMAT": "text"},
		{"SECKILL_LOG_LEVEL": "error"},
	} {
		_, err := LoadConfig(func(k string) string { return ok[k] })
		require.NoError(t, err, "%v", ok)
	}
}

// `seckill vapid` makes a new key pair each time, as the two settings that
// turn Web Push reminders on, and the configuration takes them; a pair
// whose halves do not match is refused at start, naming the command.
func TestVAPIDMakesAPairTheConfigTakes(t *testing.T) {
	pairs := make([]map[string]string, 2)
	for i := range pairs {
		env := &recordingEnv{}
		stdout, stderr, err := runCLI(t, []string{"vapid"}, env.getenv)
		require.NoError(t, err, "stderr: %s", stderr)
		require.Empty(t, env.reads(), "it reads no configuration")
		pairs[i] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok, "%q is NAME=value", line)
			pairs[i][k] = v
		}
		require.Len(t, pairs[i], 2, "%s", stdout)
		cfg, err := LoadConfig(func(k string) string { return pairs[i][k] })
		require.NoError(t, err)
		require.Equal(t, pairs[i]["SECKILL_VAPID_PUBLIC_KEY"], cfg.VAPIDPublicKey)
	}
	require.NotEqual(t, pairs[0]["SECKILL_VAPID_PRIVATE_KEY"], pairs[1]["SECKILL_VAPID_PRIVATE_KEY"])

	mixed := map[string]string{
		"SECKILL_VAPID_PUBLIC_KEY":  pairs[0]["SECKILL_VAPID_PUBLIC_KEY"],
		"SECKILL_VAPID_PRIVATE_KEY": pairs[1]["SECKILL_VAPID_PRIVATE_KEY"],
	}
	_, err := LoadConfig(func(k string) string { return mixed[k] })
	require.ErrorContains(t, err, "seckill vapid")
}
