package devstack

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"text/template"
)

// JaegerVersion is the Jaeger the project runs (the v2 binary, cmd/jaeger,
// built by `make test-deps` from deploy/tools/jaeger into bin/jaeger).
const JaegerVersion = "v1.75.0"

// JaegerOptions configures StartJaeger.
type JaegerOptions struct {
	// Dir holds the config file and jaeger.log. Created if missing.
	Dir string
	// Bin is the jaeger binary; empty looks in the repository's bin/ (from
	// the working folder up), then on PATH.
	Bin string
	Log *slog.Logger
}

// Jaeger is a running private Jaeger: an OTLP/HTTP receiver and the query
// API, both on loopback ports of their own, traces kept in memory.
type Jaeger struct {
	// OTLPEndpoint is the OTLP/HTTP receiver's host:port
	// (SECKILL_OTLP_ENDPOINT).
	OTLPEndpoint string
	// QueryURL is the UI and its HTTP API (/api/traces/{id}, /api/services).
	QueryURL string
	// LogPath is jaeger's log.
	LogPath string

	srv *server
}

// jaegerConfig is the collector configuration: Jaeger's all-in-one without
// its fixed ports (OTLP gRPC, Jaeger and Zipkin receivers, sampling,
// health, zpages, expvar and the metrics port are left out), every listener
// on 127.0.0.1.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    # Its own tracing would export to OTLP gRPC on 127.0.0.1:4317, a port
    # not ours (and every stop would wait out the export's timeout).
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{{.Query}}
    grpc:
      endpoint: 127.0.0.1:{{.QueryGRPC}}
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{{.OTLP}}
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// StartJaeger runs jaeger on free loopback ports and returns once its query
// API answers.
func StartJaeger(ctx context.Context, opts JaegerOptions) (*Jaeger, error) {
	dir, err := serviceDir(opts.Dir, "jaeger")
	if err != nil {
		return nil, err
	}
	bin := opts.Bin
	if bin == "" {
		if bin, err = findJaeger(); err != nil {
			return nil, err
		}
	}
	j, err := onFreePorts(func() (*Jaeger, error) { return startJaegerOnce(ctx, bin, dir, logger(opts.Log)) }, nil)
	if err != nil {
		return nil, err
	}
	logger(opts.Log).Info("devstack: jaeger ready", "otlp", j.OTLPEndpoint, "ui", j.QueryURL, "dir", dir, "pid", j.srv.pid())
	return j, nil
}

func startJaegerOnce(ctx context.Context, bin, dir string, log *slog.Logger) (*Jaeger, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	var cfg bytes.Buffer
	tmpl := template.Must(template.New("jaeger").Parse(jaegerConfig))
	if err := tmpl.Execute(&cfg, map[string]int{"OTLP": ports[0], "Query": ports[1], "QueryGRPC": ports[2]}); err != nil {
		return nil, fmt.Errorf("devstack: jaeger config: %w", err)
	}
	cfgPath := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("devstack: jaeger config: %w", err)
	}
	j := &Jaeger{
		OTLPEndpoint: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		QueryURL:     "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		LogPath:      filepath.Join(dir, "jaeger.log"),
	}
	j.srv = &server{
		log: log,
		spec: procSpec{
			name: "jaeger", bin: bin, args: []string{"--config", cfgPath},
			dir: dir, logPath: j.LogPath, deathSig: syscall.SIGTERM,
		},
		stopSig: syscall.SIGTERM,
		ready: func(ctx context.Context, _ *process) error {
			return httpOK(ctx, j.QueryURL+"/api/services")
		},
	}
	if err := j.srv.start(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// httpOK reports whether url answers 200.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// findJaeger is bin/jaeger of the repository holding the working folder,
// else jaeger on PATH.
func findJaeger() (string, error) {
	if dir, err := os.Getwd(); err == nil {
		for {
			p := filepath.Join(dir, "bin", "jaeger")
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
					return p, nil
				}
			}
			up := filepath.Dir(dir)
			if up == dir {
				break
			}
			dir = up
		}
	}
	p, err := findBinary("jaeger", "", "/usr/local/bin")
	if err != nil {
		return "", fmt.Errorf("devstack: jaeger %s not found in the repository's bin/ nor on PATH: run `make test-deps` (or `make deps SECKILL_DEV_TRACING=jaeger`), which builds bin/jaeger from deploy/tools/jaeger", JaegerVersion)
	}
	return p, nil
}

// Stop shuts jaeger down; safe more than once.
func (j *Jaeger) Stop(ctx context.Context) error { return j.srv.stop(ctx) }
