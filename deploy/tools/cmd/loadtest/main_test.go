package main

import (
	"bytes"
	"context"
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
