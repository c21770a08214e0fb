package main

// Running what the bench measures: the dev process, the load tool and its
// crowds with their CPU profiles, and the small process helpers they share.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/seckill/deploy/tools/loadtest"
)

// startDev starts `seckill dev` in its own process group and returns a stop
// function (SIGTERM, then SIGKILL after 20 s) that is safe to call twice,
// and its pid.
func startDev(ctx context.Context, bin string, env []string, logPath string) (func(), int, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, 0, err
	}
	cmd := exec.Command(bin, "dev")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, 0, fmt.Errorf("start %s dev: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	stopped := false
	return func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}, cmd.Process.Pid, nil
}

func waitReady(ctx context.Context, base string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("seckill dev was not ready within %s", within)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Profiles of the crowds: what each counts and how long it runs. The
// sold-out crowd's 20 000 answers take one to a few seconds, so its window
// is shorter than the accepted run's, which lasts several.
const (
	outcomeAccepted        = "accepted" // the gateway's buy outcome of an order
	outcomeAny             = ""         // every buy outcome
	acceptedProfileSeconds = 4
	soldOutProfileSeconds  = 2
)

// healthzProfileSeconds is the profile of the trivial route's ceiling,
// which lasts ceilingFor: about its middle half, at least a second.
func healthzProfileSeconds(ceilingFor time.Duration) int {
	return max(1, int(ceilingFor/time.Second)/2)
}

// crowdRun runs one crowd of the load tool into rep while a CPU profile of
// the process, anchored to the crowd's first answer of outcome, is taken
// to path (none when path is ""). A failed profile does not fail the run:
// its error is in the result. base is the gateway, metrics its ops
// listener.
func crowdRun(ctx context.Context, bin string, env, args []string, rep *loadtest.Report, base, metrics, path, outcome string, seconds int) (crowdProfileResult, error) {
	var prof *crowdProfile
	if path != "" {
		var err error
		// Read before the tool starts, so that its first answer is seen.
		if prof, err = startCrowdProfile(ctx, base, metrics, path, outcome, seconds); err != nil {
			return crowdProfileResult{}, fmt.Errorf("CPU profile: %w", err)
		}
	}
	if err := loadtestRun(ctx, bin, env, args, rep); err != nil {
		return crowdProfileResult{}, err
	}
	if prof == nil {
		return crowdProfileResult{}, nil
	}
	share, err := prof.wait()
	return crowdProfileResult{share: share, err: err}, nil
}

// loadtestRun runs the load tool and decodes its JSON report.
func loadtestRun(ctx context.Context, bin string, env, args []string, rep *loadtest.Report) error {
	out, err := command(ctx, bin, env, args...)
	// A failed invariant exits non-zero with the report on stdout.
	if jerr := json.Unmarshal(out, rep); jerr != nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("load test report: %w", jerr)
	}
	return nil
}

// takeProfile saves a CPU profile of seconds of the process at path.
func takeProfile(ctx context.Context, base, path string, seconds int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		fmt.Sprintf("%s/api/v1/admin/debug/pprof/profile?seconds=%d", base, seconds), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer bench-admin-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: HTTP %d", resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: CPU profile %s\n", path)
	return f.Close()
}

// command runs bin with args and returns its stdout; stderr passes through.
func command(ctx context.Context, bin string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", filepath.Base(bin), strings.Join(args[:1], " "), err)
	}
	return out, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
