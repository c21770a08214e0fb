package apiclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The checked-in client is what `go generate` makes of gateway/openapi.yaml
// now: the generator (go.mod's tool) regenerates it into a temporary folder
// and the two must be the same byte for byte.
func TestGeneratedClientIsUpToDate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	require.NoError(t, err)
	// The same configuration, writing elsewhere (the flag -o does not
	// override a configuration's output).
	cfg = bytes.Replace(cfg, []byte("output: client.gen.go"), []byte("output: "+out), 1)
	require.Contains(t, string(cfg), out, "oapi-codegen.yaml names its output client.gen.go")
	cfgFile := filepath.Join(dir, "oapi-codegen.yaml")
	require.NoError(t, os.WriteFile(cfgFile, cfg, 0o600))
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", cfgFile, "../../../gateway/openapi.yaml")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "oapi-codegen: %s", stderr.String())
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	current, err := os.ReadFile("client.gen.go")
	require.NoError(t, err)
	require.True(t, bytes.Equal(fresh, current),
		"deploy/tools/apiclient/client.gen.go is not what gateway/openapi.yaml generates: run `go generate ./apiclient` in deploy/tools")
}
