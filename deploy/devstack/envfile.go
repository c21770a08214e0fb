package devstack

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

// EnvFile is the file a running `seckill dev` keeps in its data folder
// (SECKILL_DATA_DIR): NAME=value lines of where it listens and the secrets
// it uses, generated ones included, so that the tool needs no copy and
// paste. cmd/seckill writes it (dev mode's banner names it); the
// load tool and make bench read it.
const EnvFile = "dev.env"

// ReadEnvFile reads dir's EnvFile; a folder without one is no error (no
// `seckill dev` runs there) and gives nothing.
func ReadEnvFile(dir string) (map[string]string, error) {
	path := filepath.Join(dir, EnvFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("devstack: %w", err)
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
