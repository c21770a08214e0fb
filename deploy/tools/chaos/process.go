package chaos

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/flashsale/seckill/deploy/devstack"
)

// devPostgresURL finds the URL of the PostgreSQL a `seckill dev` started, in
// its log (the last "postgres ready" line).
var devPostgresURL = regexp.MustCompile(`msg="devstack: postgres ready" url=(\S+)`)

func lastPostgresURL(logPath string) (string, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	m := devPostgresURL.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return "", fmt.Errorf("chaos: no \"postgres ready\" line in %s", logPath)
	}
	return strings.Trim(string(m[len(m)-1][1]), `"`), nil
}

// ScratchDir makes a folder for a run's service data and logs (on tmpfs when
// there is room). A failed run keeps its folder for its logs; the next run
// removes it (devstack.OwnedTempDir).
func ScratchDir() (string, error) {
	return devstack.OwnedTempDir("seckill-chaos-*", nil)
}
