package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// Every scenario is a subcommand whose -h prints its own usage, and a
// missing or unknown scenario is an error that lists them.
func TestSubcommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own := map[loadtest.Scenario]string{
		loadtest.ScenarioSale:    "-attempts",
		loadtest.ScenarioCrowd:   "-catalog-reads",
		loadtest.ScenarioRoom:    "-room-rate",
		loadtest.ScenarioChurn:   "-redis",
		loadtest.ScenarioCeiling: "-path",
	}
	require.Len(t, own, len(loadtest.Scenarios()))
	for s, flag := range own {
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(ctx, []string{string(s), "-h"}, nil, &stdout, &stderr))
		require.Contains(t, stdout.String(), "usage: loadtest "+string(s)+" [flags]")
		require.Contains(t, stdout.String(), flag+" ")
		for other, theirs := range own {
			if other != s {
				require.NotContains(t, stdout.String(), theirs+" ", "%s -h lists %s's flag", s, other)
			}
		}
	}

	var stdout, stderr bytes.Buffer
	require.ErrorContains(t, run(ctx, nil, nil, &stdout, &stderr), "no scenario")
	require.Contains(t, stderr.String(), "ceiling")
	require.ErrorContains(t, run(ctx, []string{"auction"}, nil, &stdout, &stderr), `unknown scenario "auction"`)
	require.ErrorContains(t, run(ctx, []string{"sale"}, func(string) string { return "" }, &stdout, &stderr), "SECKILL_JWT_SECRET is not set")
}

// TestExitStatus is seckill's convention for the command line: -h prints
// the usage on stdout and exits 0; a command line refused before anything
// runs exits 2 with its message and the usage on stderr; anything else that
// fails, a setting missing from the environment or a run that cannot be
// made, exits 1 with its message alone.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{"SECKILL_ADMIN_TOKEN": "adm", "SECKILL_JWT_SECRET": "sec"}
	// A data folder without dev.env: nothing comes from a `seckill dev`
	// that may be running where the test runs.
	noDev := t.TempDir()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := "http://" + closed.Addr().String()
	require.NoError(t, closed.Close())

	for _, tc := range []struct {
		args  []string
		env   map[string]string
		code  int
		usage string // on stdout for 0, on stderr for 2
		says  string // on stderr
	}{
		{args: []string{"-h"}, usage: "usage: loadtest <scenario>"},
		{args: []string{"help"}, usage: "usage: loadtest <scenario>"},
		{args: []string{"sale", "-h"}, usage: "usage: loadtest sale [flags]"},
		{args: []string{"ceiling", "--help"}, usage: "usage: loadtest ceiling [flags]"},

		{args: nil, code: 2, usage: "usage: loadtest <scenario>", says: "loadtest: no scenario given"},
		{args: []string{"auction"}, code: 2, usage: "usage: loadtest <scenario>", says: `loadtest: unknown scenario "auction"`},
		{args: []string{"sale", "-bogus"}, code: 2, usage: "usage: loadtest sale [flags]", says: "loadtest sale: flag provided but not defined: -bogus"},
		{args: []string{"sale", "-shoppers", "many"}, code: 2, usage: "usage: loadtest sale [flags]", says: "-shoppers"},
		{args: []string{"sale", "extra"}, code: 2, usage: "usage: loadtest sale [flags]", says: `unexpected argument "extra"`},
		{args: []string{"sale", "-shoppers", "0"}, env: secrets, code: 2, usage: "usage: loadtest sale [flags]", says: "shoppers must be at least 1"},
		{args: []string{"sale", "-url", "gw:80"}, env: secrets, code: 2, usage: "usage: loadtest sale [flags]", says: `url "gw:80" must be`},
		{args: []string{"sale", "-url", nobody, "-target", "gw:80"}, env: secrets, code: 2, usage: "usage: loadtest sale [flags]", says: "-url and -target"},
		{args: []string{"room", "-shoppers", "0"}, env: secrets, code: 2, usage: "usage: loadtest room [flags]", says: "shoppers must be at least 1"},
		{args: []string{"churn", "-for", "0s"}, env: secrets, code: 2, usage: "usage: loadtest churn [flags]", says: "-for must be positive"},

		{args: []string{"sale", "-data-dir", noDev}, code: 1, says: "SECKILL_JWT_SECRET is not set"},
		{args: []string{"sale", "-data-dir", noDev}, env: map[string]string{"SECKILL_LOADTEST_URL": "gw:80"}, code: 1, says: `url "gw:80" must be`},
		{args: []string{"sale", "-url", nobody, "-no-progress"}, env: secrets, code: 1, says: "loadtest: clock: GET /healthz"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runMain(t.Context(), tc.args, func(k string) string { return tc.env[k] }, &stdout, &stderr)
			require.Equal(t, tc.code, code, "stderr:\n%s", &stderr)
			switch tc.code {
			case 0:
				require.Contains(t, stdout.String(), tc.usage)
				require.Empty(t, stderr.String())
			case 2:
				require.Empty(t, stdout.String())
				first, rest, _ := strings.Cut(stderr.String(), "\n")
				require.Contains(t, first, tc.says, "the message first")
				require.Contains(t, rest, tc.usage, "then the usage")
			default:
				require.Empty(t, stdout.String())
				require.Contains(t, stderr.String(), tc.says)
				require.NotContains(t, stderr.String(), "usage: loadtest", "no usage for a command line that was right")
				require.NotContains(t, stderr.String(), "loadtest: loadtest:", "named once")
			}
		})
	}
}
