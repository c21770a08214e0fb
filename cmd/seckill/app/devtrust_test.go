//go:build !nodev

package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevModeAloneTrustsLoopback: the production default believes no
// X-Forwarded-For; dev mode adds 127.0.0.1 and ::1 (so that the load tool's
// shoppers are addresses of their own, CONFIG.md), beside any proxy named,
// unless SECKILL_DEV_TRUST_LOOPBACK=false.
func TestDevModeAloneTrustsLoopback(t *testing.T) {
	load := func(env map[string]string) Config {
		t.Helper()
		cfg, err := LoadConfig(func(k string) string { return env[k] })
		require.NoError(t, err)
		return cfg
	}

	cfg := load(nil)
	require.Empty(t, cfg.TrustedProxies, "serve believes no proxy unless told")
	require.True(t, cfg.DevTrustLoopback)
	cfg.trustDevLoopback()
	require.Equal(t, []string{"127.0.0.1", "::1"}, cfg.TrustedProxies)

	cfg = load(map[string]string{"SECKILL_TRUSTED_PROXIES": "10.0.0.0/8"})
	require.Equal(t, []string{"10.0.0.0/8"}, cfg.TrustedProxies)
	cfg.trustDevLoopback()
	require.Equal(t, []string{"10.0.0.0/8", "127.0.0.1", "::1"}, cfg.TrustedProxies, "added to the proxies named, not instead")

	cfg = load(map[string]string{"SECKILL_DEV_TRUST_LOOPBACK": "false", "SECKILL_TRUSTED_PROXIES": "10.0.0.1"})
	cfg.trustDevLoopback()
	require.Equal(t, []string{"10.0.0.1"}, cfg.TrustedProxies, "switched off: the proxies named alone, as serve")

	_, err := LoadConfig(func(k string) string { return map[string]string{"SECKILL_DEV_TRUST_LOOPBACK": "maybe"}[k] })
	require.ErrorContains(t, err, "SECKILL_DEV_TRUST_LOOPBACK")
}
