//go:build !nodev

package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/deploy/devstack"
)

// dev.env names the private services too, so that a tool can read their
// counters (make bench's cost table): Redis as one URL or a cluster's seeds.
func TestDevEnvNamesTheServices(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantKey string
		want    string
	}{
		{"plain", Config{RedisURL: "redis://127.0.0.1:6390/0"}, "SECKILL_REDIS_URL", "redis://127.0.0.1:6390/0"},
		{"cluster", Config{RedisCluster: []string{"127.0.0.1:7001", "127.0.0.1:7002"}}, "SECKILL_REDIS_CLUSTER_ADDRS", "127.0.0.1:7001,127.0.0.1:7002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.cfg.DatabaseURL = "postgres://postgres@127.0.0.1:5499/seckill?sslmode=disable"
			tc.cfg.AdminToken = "admin-token"
			d := devEndpoints{addr: "127.0.0.1:8080", opsAddr: "127.0.0.1:9090", dataDir: dir, cfg: tc.cfg}
			_, err := d.writeDevEnv()
			require.NoError(t, err)
			vars, err := devstack.ReadEnvFile(dir)
			require.NoError(t, err)
			require.Equal(t, tc.want, vars[tc.wantKey])
			require.Equal(t, tc.cfg.DatabaseURL, vars["SECKILL_DATABASE_URL"])
			require.Equal(t, "admin-token", vars["SECKILL_ADMIN_TOKEN"])
		})
	}
}
