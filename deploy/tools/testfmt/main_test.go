package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashsale/seckill/seckill/testlog"
)

// goTestJSON runs the real `go test -json ./...` on a module of four
// packages: a passes (and logs, which go test hides), b fails, c has no
// tests, d does not build.
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.24\n",
		"a/a_test.go": `package a
import ("fmt"; "os"; "testing")
func TestMain(m *testing.M) { fmt.Println("main's own log"); os.Exit(m.Run()) }
func TestPasses(t *testing.T) { t.Log("a passing test's log"); t.Run("sub", func(t *testing.T) {}) }
func TestAlsoPasses(t *testing.T) {}
`,
		"b/b_test.go": `package b
import "testing"
func TestPasses(t *testing.T) { t.Log("quiet") }
func TestFails(t *testing.T) { t.Log("why it failed"); t.Run("sub", func(t *testing.T) { t.Error("the sub-test's error") }) }
`,
		"c/c.go":      "package c\n",
		"d/d_test.go": "package d\nimport \"testing\"\nfunc TestX(t *testing.T) { undefinedName() }\n",
	}
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	cmd := exec.Command("go", "test", "-json", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "go test fails: b fails and d does not build")
	return out
}

// TestFormatIsGoTestsOwnOutput: what `make test` prints is what go test
// prints without -v (each package's closing line, a failing test's output,
// build errors, nothing of passing tests), plus the slow package's tests as
// they end, and a failure is a failure.
func TestFormatIsGoTestsOwnOutput(t *testing.T) {
	var out bytes.Buffer
	failed, err := format(bytes.NewReader(goTestJSON(t)), &out, []string{"a"})
	require.NoError(t, err)
	require.True(t, failed)
	got := out.String()
	t.Logf("formatted:\n%s", got)

	require.Regexp(t, `(?m)^ok  \texample.com/m/a\t\S+s$`, got)
	require.Contains(t, got, "example.com/m/a: --- PASS: TestPasses (")
	require.Contains(t, got, "example.com/m/a: --- PASS: TestAlsoPasses (")
	require.NotContains(t, got, "TestPasses/sub", "top-level tests only")
	require.NotContains(t, got, "a passing test's log")
	require.NotContains(t, got, "main's own log", "a passing package shows its closing line alone")

	require.Contains(t, got, "--- FAIL: TestFails (")
	require.Contains(t, got, "why it failed")
	require.Contains(t, got, "the sub-test's error")
	require.NotContains(t, got, "quiet")
	require.NotContains(t, got, "b: --- PASS", "b is not a slow package")
	require.Regexp(t, `(?m)^FAIL\texample.com/m/b\t\S+s$`, got)

	require.Regexp(t, `(?m)^\?   \texample.com/m/c\t\[no test files\]$`, got)
	require.Contains(t, got, "undefinedName", "the build error")
	require.Regexp(t, `(?m)^FAIL\texample.com/m/d \[build failed\]$`, got)
	require.NotContains(t, got, `"Action"`, "no JSON left")
	require.NotContains(t, got, "=== RUN")

	// Without a failure, no failure.
	var pass bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(goTestJSON(t)))
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && (e.Package == "example.com/m/a" || e.Package == "example.com/m/c") {
			pass.Write(append(sc.Bytes(), '\n'))
		}
	}
	failed, err = format(&pass, io.Discard, nil)
	require.NoError(t, err)
	require.False(t, failed)
}

// TestFormatStreams: a package's closing line is printed as soon as its
// events say it ended, not when the whole run does.
func TestFormatStreams(t *testing.T) {
	events := goTestJSON(t)
	r, w := io.Pipe()
	var out testlog.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = format(r, &out, []string{"a"})
	}()
	sc := bufio.NewScanner(bytes.NewReader(events))
	ended := 0
	for sc.Scan() {
		_, err := w.Write(append(sc.Bytes(), '\n'))
		require.NoError(t, err)
		var e event
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Test == "" && e.Package == "example.com/m/a" && e.Action == "pass" {
			ended++
			// The stream is still open: the line must come now.
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "ok  \texample.com/m/a") },
				30*time.Second, 10*time.Millisecond, "a's result waited for the end of the run")
		}
	}
	require.Equal(t, 1, ended)
	require.NoError(t, w.Close())
	<-done
}
