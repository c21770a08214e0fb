package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigDefaultsAndParsing(t *testing.T) {
	cfg, err := loadConfig(func(string) string { return "" })
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, 15*time.Minute, cfg.PayTimeout)
	require.Equal(t, []string{"gateway", "worker", "sweeper"}, cfg.Roles)

	env := map[string]string{
		"SECKILL_PAY_TIMEOUT":   "3s",
		"SECKILL_KAFKA_BROKERS": " a:1, b:2 ,",
		"SECKILL_ROLES":         "worker",
		"SECKILL_DEMO_VOUCHER":  "false",
	}
	cfg, err = loadConfig(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, cfg.PayTimeout)
	require.Equal(t, []string{"a:1", "b:2"}, cfg.KafkaBrokers)
	require.True(t, cfg.hasRole(roleWorker))
	require.False(t, cfg.hasRole(roleGateway))
	require.False(t, cfg.DemoVoucher)

	for k, v := range map[string]string{
		"SECKILL_PAY_TIMEOUT": "15", "SECKILL_USER_RATE": "fast", "SECKILL_ROLES": "gateway,cashier",
		"SECKILL_GLOBAL_RATE": "0", "SECKILL_DEMO_VOUCHER": "maybe",
	} {
		_, err := loadConfig(func(key string) string {
			if key == k {
				return v
			}
			return ""
		})
		require.Error(t, err, "%s=%s", k, v)
		require.Contains(t, err.Error(), k, "the error names the variable")
	}
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	env := map[string]string{
		"SECKILL_JWT_SECRET":   "super-secret-jwt-key",
		"SECKILL_ADMIN_TOKEN":  "super-secret-admin",
		"SECKILL_DATABASE_URL": "postgres://app:hunter2@db:5432/seckill",
	}
	cfg, err := loadConfig(func(k string) string { return env[k] })
	require.NoError(t, err)
	var printed strings.Builder
	for _, kv := range cfg.printable() {
		printed.WriteString(kv[0] + "=" + kv[1] + "\n")
	}
	for _, secret := range []string{"super-secret-jwt-key", "super-secret-admin", "hunter2"} {
		require.NotContains(t, printed.String(), secret)
	}
	require.Contains(t, printed.String(), "postgres://app:****@db:5432/seckill", "the server stays visible")
}

// TestREADMEListsEveryVariable keeps the README's configuration table in
// step with Config.
func TestREADMEListsEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		name := typ.Field(i).Tag.Get("env")
		require.Contains(t, string(readme), "`"+name+"`", "README.md's configuration table lacks %s (run `seckill env`)", name)
	}
}
