package loadtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DevEnvFile is the file a running `seckill dev` keeps in its data folder
// (SECKILL_DATA_DIR): NAME=value lines of where it listens and the secrets
// it uses, generated ones included, so that the tool needs no copy and
// paste. cmd/seckill writes it (dev mode's banner names it).
const DevEnvFile = "dev.env"

// ReadDevEnv reads dir's DevEnvFile; a folder without one is no error (no
// `seckill dev` runs there) and gives nothing.
func ReadDevEnv(dir string) (map[string]string, error) {
	path := filepath.Join(dir, DevEnvFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return vars, sc.Err()
}

// fillFromDevEnv takes what the environment and the flags left unset from
// the DevEnvFile of cfg.DataDir: the secrets, the base URL (unless -url,
// -target or EnvURL gave one) and the metrics URL. It returns the file's
// path when it used it, for the report.
func fillFromDevEnv(cfg *Config, urlGiven bool) (string, error) {
	if cfg.DataDir == "" || (cfg.JWTSecret != "" && cfg.AdminToken != "" && urlGiven && cfg.MetricsURL != "") {
		return "", nil
	}
	vars, err := ReadDevEnv(cfg.DataDir)
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
	return filepath.Join(cfg.DataDir, DevEnvFile), nil
}
