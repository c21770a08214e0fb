// Package testlog gives tests somewhere to send logs: a buffer that many
// goroutines may write while the test reads it, and a writer into the test's
// own log. It is for tests only; nothing in production imports it. It sits in
// seckill/, the lowest layer of code, so that the test helpers of every layer
// above (orders/kafkaq/kafkaqtest among them) may import it.
package testlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that a process under test (its handlers, loops
// and child processes) may write from any goroutine while the test reads it.
// The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines decodes every non-empty line written so far as one JSON object
// (the records of a slog.JSONHandler), failing the test on a line that is not.
func (b *Buffer) JSONLines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not a JSON object: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

// Writer returns a writer into t's log, one t.Log call per write, without
// the trailing newline: what a process prints shows beside the test that
// started it, and only when the test fails or runs with -v.
func Writer(t testing.TB) *TWriter { return &TWriter{t: t} }

// TWriter writes into a test's log; see [Writer].
type TWriter struct{ t testing.TB }

// Write logs p as one line of the test's log.
func (w *TWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Logger returns a text logger at level into t's log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t), &slog.HandlerOptions{Level: level}))
}
