package systemtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tsClientDir is the TypeScript client (deploy/clients/typescript), whose
// node_modules `make test-deps` installs.
const tsClientDir = "../../clients/typescript"

// A shopper's whole journey through the TypeScript client generated from
// gateway/openapi.yaml, run by node against the real system: register (and
// a refused registration naming both bad fields), sign in, page through the
// vouchers, join a line and buy with its pass, pay, buy again and cancel,
// page through the orders. Then the system itself is asked what happened.
func TestTypeScriptClientJourney(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed: `make test-deps` installs it")
	_, err = os.Stat(filepath.Join(tsClientDir, "node_modules", "openapi-fetch"))
	require.NoError(t, err, "the client's packages are needed: `make test-deps` installs them")

	ts := startSystem(t, map[string]string{"SECKILL_TRUSTED_PROXIES": "127.0.0.1"}) // the journey names its address
	begin := time.Now().Add(-time.Second)
	// The script finds the two by the titles the helpers give them.
	line := ts.createRoomVoucher(t, 5, 1, 50, 0, begin, begin.Add(time.Hour))
	plain := ts.createVoucher(t, 5, 1, begin, begin.Add(time.Hour))

	cmd := exec.CommandContext(t.Context(), node, "journey.js", ts.base, "room voucher", "test voucher")
	cmd.Dir = tsClientDir
	// From an address of its own: the package's tests share one Redis,
	// and with it the sign-in budget of 127.0.0.1.
	cmd.Env = append(os.Environ(), "SECKILL_JOURNEY_ADDRESS="+fromAnywhere()["X-Forwarded-For"])
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "journey.js: %s%s", stdout.String(), stderr.String())

	var out struct {
		UserID    string `json:"user_id"`
		Paid      string `json:"paid"`
		Cancelled string `json:"cancelled"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), "%s", stdout.String())
	var uid int64
	_, err = fmt.Sscan(out.UserID, &uid)
	require.NoError(t, err)
	token := ts.shopper(t, uid)
	paid := ts.do(t, http.MethodGet, "/api/v1/orders/"+out.Paid, token, nil, nil)
	require.Equal(t, http.StatusOK, paid.status, "%s", paid.raw)
	require.Equal(t, "paid", paid.body["status"])
	require.Equal(t, line, paid.body["voucher_id"])
	cancelled := ts.do(t, http.MethodGet, "/api/v1/orders/"+out.Cancelled, token, nil, nil)
	require.Equal(t, http.StatusOK, cancelled.status, "%s", cancelled.raw)
	require.Equal(t, "cancelled", cancelled.body["status"])
	require.Equal(t, plain, cancelled.body["voucher_id"])
}
