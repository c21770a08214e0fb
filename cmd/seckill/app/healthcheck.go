package app

// `seckill healthcheck`: the image's HEALTHCHECK. The production image has
// no shell, curl or wget (deploy/Dockerfile), so the binary asks its own
// ops listener.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

const healthcheckUsage = `usage: seckill healthcheck [--path /readyz|/healthz] [--timeout D]

Asks this process's ops listener (SECKILL_OPS_ADDR for a gateway, else
SECKILL_HTTP_ADDR, as 'seckill serve' listens) for /readyz (ready: every
service answers) or /healthz (alive) and exits 0 on 200, 1 otherwise. It is
the image's HEALTHCHECK (deploy/Dockerfile): the image has no curl.

Flags:
`

// healthcheckPaths are the routes of the ops listener a probe may ask.
var healthcheckPaths = map[string]bool{"/readyz": true, "/healthz": true}

func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("healthcheck", healthcheckUsage)
	path := fs.String("path", "/readyz", "the route to ask: /readyz or /healthz")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if help, err := parseFlags(fs, args, 0, stdout, stderr); help || err != nil {
		return err
	}
	if !healthcheckPaths[*path] || *timeout <= 0 {
		return refuseArgs(fs, stderr, usagef("healthcheck: --path must be /readyz or /healthz and --timeout positive"))
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	addr, err := cfg.opsProbeAddr()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+*path, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: GET %s answered %d: %s", req.URL, resp.StatusCode, body)
	}
	_, err = stdout.Write(body)
	return err
}

// opsProbeAddr is where a probe on this machine reaches the ops listener:
// the address the process listens on, with a wildcard host made loopback.
func (c Config) opsProbeAddr() (string, error) {
	addr, name := c.HTTPAddr, "SECKILL_HTTP_ADDR"
	if c.HasRole(RoleGateway) {
		addr, name = c.OpsAddr, "SECKILL_OPS_ADDR"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("healthcheck: %s=%q: %w", name, addr, err)
	}
	if port == "0" {
		return "", fmt.Errorf("healthcheck: %s=%q has the port chosen at start; give it a fixed port", name, addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port), nil
}
