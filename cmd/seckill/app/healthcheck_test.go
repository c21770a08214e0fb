package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/gateway"
)

// serveOps serves the ops listener, as every process does, on a free
// loopback port; its one check fails while down is set.
func serveOps(t *testing.T, down *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	check := gateway.Check{Name: "redis", Ping: func(context.Context) error {
		if down.Load() {
			return errors.New("refused")
		}
		return nil
	}}
	srv := &http.Server{Handler: gateway.OpsHandler([]gateway.Check{check}, nil, nil)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestHealthcheckAsksTheOpsListener: `seckill healthcheck` finds the ops
// listener as serve binds it (a gateway's SECKILL_OPS_ADDR, any other
// role's SECKILL_HTTP_ADDR, a wildcard host asked on loopback) and exits 0
// only while /readyz answers 200; /healthz answers while a service is down.
func TestHealthcheckAsksTheOpsListener(t *testing.T) {
	var down atomic.Bool
	addr := serveOps(t, &down)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)

	for _, env := range []map[string]string{
		{"SECKILL_ROLES": "gateway,sweeper", "SECKILL_OPS_ADDR": "0.0.0.0:" + port, "SECKILL_HTTP_ADDR": "127.0.0.1:1"},
		{"SECKILL_ROLES": "worker", "SECKILL_HTTP_ADDR": ":" + port, "SECKILL_OPS_ADDR": "127.0.0.1:1"},
	} {
		getenv := func(k string) string { return env[k] }
		down.Store(false)
		// A probe's answer is kept for a moment (DefaultReadyMaxAge), so a
		// change is seen soon, not at once.
		var stdout, stderr string
		require.Eventually(t, func() bool {
			stdout, stderr, err = runCLI(t, []string{"healthcheck"}, getenv)
			return err == nil
		}, gateway.DefaultReadyMaxAge*20, gateway.DefaultReadyMaxAge/2, "roles %s: %v %s", env["SECKILL_ROLES"], err, stderr)
		require.Contains(t, stdout, `"status"`)

		down.Store(true)
		require.Eventually(t, func() bool {
			_, _, err := runCLI(t, []string{"healthcheck"}, getenv)
			return err != nil && ExitCode(err) == 1
		}, gateway.DefaultReadyMaxAge*20, gateway.DefaultReadyMaxAge/2, "roles %s: /readyz fails while redis is down", env["SECKILL_ROLES"])
		_, stderr, err := runCLI(t, []string{"healthcheck", "--path", "/healthz"}, getenv)
		require.NoError(t, err, "alive while a service is down: %s", stderr)
	}

	// Nothing listens: exit 1, not a usage error.
	_, _, err = runCLI(t, []string{"healthcheck"}, func(k string) string {
		return map[string]string{"SECKILL_ROLES": "worker", "SECKILL_HTTP_ADDR": "127.0.0.1:1"}[k]
	})
	require.Equal(t, 1, ExitCode(err), "%v", err)

	// The default ops address has its port chosen at start: no probe can
	// find it, and the message says so.
	_, _, err = runCLI(t, []string{"healthcheck"}, func(string) string { return "" })
	require.ErrorContains(t, err, "SECKILL_OPS_ADDR")
	require.ErrorContains(t, err, "fixed port")

	// Only the two probes' routes.
	_, stderr, err := runCLI(t, []string{"healthcheck", "--path", "/metrics"}, func(string) string { return "" })
	require.Equal(t, 2, ExitCode(err), "%v", err)
	require.Contains(t, stderr, "usage: seckill healthcheck")
}
