package apiclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The checked-in TypeScript schema (deploy/clients/typescript/schema.d.ts)
// is what the pinned openapi-typescript makes of gateway/openapi.yaml now:
// regenerated into a temporary folder, the two must be the same byte for
// byte. `make test-deps` installs the generator.
func TestTypeScriptClientIsUpToDate(t *testing.T) {
	const dir = "../../clients/typescript"
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed: `make test-deps` installs it")
	cli := filepath.Join(dir, "node_modules", "openapi-typescript", "bin", "cli.js")
	_, err = os.Stat(cli)
	require.NoError(t, err, "openapi-typescript is needed: `make test-deps` installs it")
	out := filepath.Join(t.TempDir(), "schema.d.ts")
	cmd := exec.Command(node, cli, "../../../gateway/openapi.yaml", "-o", out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "openapi-typescript: %s", stderr.String())
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	current, err := os.ReadFile(filepath.Join(dir, "schema.d.ts"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(fresh, current),
		"deploy/clients/typescript/schema.d.ts is not what gateway/openapi.yaml generates: run `npm run generate` in deploy/clients/typescript")
}
