package loadtest

import (
	"path/filepath"

	"github.com/flashsale/seckill/deploy/devstack"
)

// fillFromDevEnv takes what the environment and the flags left unset from
// the devstack.EnvFile of cfg.DataDir: the secrets, the base URL (unless -url,
// -target or EnvURL gave one) and the metrics URL. It returns the file's
// path when it used it, for the report.
func fillFromDevEnv(cfg *Config, urlGiven bool) (string, error) {
	if cfg.DataDir == "" || (cfg.JWTSecret != "" && cfg.AdminToken != "" && urlGiven && cfg.MetricsURL != "") {
		return "", nil
	}
	vars, err := devstack.ReadEnvFile(cfg.DataDir)
	if err != nil || len(vars) == 0 {
		return "", err
	}
	fill := func(field *string, name string) {
		if *field == "" {
			*field = vars[name]
		}
	}
	fill(&cfg.JWTSecret, EnvJWTSecret)
	fill(&cfg.AdminToken, EnvAdminToken)
	fill(&cfg.MetricsURL, EnvMetricsURL)
	if u := vars[EnvURL]; !urlGiven && u != "" {
		cfg.BaseURL = u
	}
	return filepath.Join(cfg.DataDir, devstack.EnvFile), nil
}
