package gateway

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// The contract's changelog and its version move together: the newest
// version gateway/CHANGELOG.md describes is info.version of
// gateway/openapi.yaml, and the versions go down the file.
func TestChangelogMatchesSpecVersion(t *testing.T) {
	info := yamlMap(t, openAPIDocument(t)["info"], "info")
	version, ok := info["version"].(string)
	require.True(t, ok, "info.version is a string: %v", info["version"])
	require.Regexp(t, `^[0-9]+\.[0-9]+$`, version, "MAJOR.MINOR, as gateway/CHANGELOG.md says")

	raw, err := os.ReadFile("CHANGELOG.md")
	require.NoError(t, err)
	heads := regexp.MustCompile(`(?m)^## ([0-9]+)\.([0-9]+)\s*$`).FindAllStringSubmatch(string(raw), -1)
	require.NotEmpty(t, heads, "gateway/CHANGELOG.md has a section per version (## MAJOR.MINOR)")
	require.Equal(t, version, heads[0][1]+"."+heads[0][2],
		"info.version of gateway/openapi.yaml is the newest version of gateway/CHANGELOG.md")
	num := func(h []string) [2]int {
		major, err1 := strconv.Atoi(h[1])
		minor, err2 := strconv.Atoi(h[2])
		require.NoError(t, errors.Join(err1, err2), h[0])
		return [2]int{major, minor}
	}
	for i := 1; i < len(heads); i++ {
		prev, cur := num(heads[i-1]), num(heads[i])
		require.True(t, prev[0] > cur[0] || (prev[0] == cur[0] && prev[1] > cur[1]),
			"newest first: %v comes before %v", prev, cur)
	}
	require.Contains(t, string(raw), "## Versions and deprecation", "the changelog states its deprecation policy")
}
