// Command testfmt prints a `go test -json` stream as `go test` prints its
// own, package by package as each ends, so that `make test` shows progress
// instead of nothing until a package finishes: each package's closing line
// (ok, FAIL, "? ... [no test files]") as it ends, the output of every
// failing test, build errors, and, for the slow packages named by
// -progress, each top-level test's "--- PASS"/"--- FAIL" line as it ends.
// The run ends with go test's usual lines, and testfmt exits 1 if any test
// or package failed (the Makefile's pipefail adds go test's own status).
//
//	go test -json ./... | go -C deploy/tools run ./testfmt -progress cmd/seckill,deploy/tools/chaos
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	progress := flag.String("progress", "", "comma-separated packages (import paths or their trailing folders) whose tests are printed as they end")
	flag.Parse()
	var slow []string
	for p := range strings.SplitSeq(*progress, ",") {
		if p = strings.TrimSpace(p); p != "" {
			slow = append(slow, p)
		}
	}
	failed, err := format(os.Stdin, os.Stdout, slow)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testfmt:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build events
	Test       string
	Elapsed    float64
	Output     string
}

// format copies r's events to w as go test would print them without -v,
// plus the progress of the packages of slow. It reports whether anything
// failed.
func format(r io.Reader, w io.Writer, slow []string) (failed bool, err error) {
	// tests holds each running top-level test's output, printed only if
	// it fails; pkgs holds each package's own output (TestMain's logs, a
	// panic, its closing line), printed whole only if it fails, as go
	// test prints a passing package's "ok" line alone.
	tests := map[string]*strings.Builder{}
	pkgs := map[string]*strings.Builder{}
	buf := func(m map[string]*strings.Builder, k string) *strings.Builder {
		b := m[k]
		if b == nil {
			b = &strings.Builder{}
			m[k] = b
		}
		return b
	}
	testKey := func(e event) string {
		top, _, _ := strings.Cut(e.Test, "/")
		return e.Package + " " + top
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event (go test's own messages): as it is.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		switch {
		case e.Action == "build-output":
			fmt.Fprint(w, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			buf(pkgs, e.Package).WriteString(e.Output)
		case e.Test == "" && (e.Action == "pass" || e.Action == "skip"):
			for l := range strings.Lines(buf(pkgs, e.Package).String()) {
				if strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "?   \t") {
					fmt.Fprint(w, l)
				}
			}
			delete(pkgs, e.Package)
		case e.Test == "" && e.Action == "fail":
			failed = true
			// Tests the package never finished (a timeout, a panic) first.
			for k, b := range tests {
				if strings.HasPrefix(k, e.Package+" ") {
					fmt.Fprint(w, b.String())
					delete(tests, k)
				}
			}
			fmt.Fprint(w, buf(pkgs, e.Package).String())
			delete(pkgs, e.Package)
		case e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") { // RUN, PAUSE, CONT, NAME: -v's
				buf(tests, testKey(e)).WriteString(e.Output)
			}
		case (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") && !strings.Contains(e.Test, "/"):
			b := buf(tests, testKey(e))
			delete(tests, testKey(e))
			switch {
			case e.Action == "fail":
				failed = true
				fmt.Fprint(w, b.String())
			case isSlow(e.Package, slow):
				fmt.Fprintf(w, "%s: --- %s: %s (%.2fs)\n", e.Package, strings.ToUpper(e.Action), e.Test, e.Elapsed)
			}
		}
	}
	return failed, sc.Err()
}

// isSlow says whether pkg is one of slow: its import path, or a trailing
// run of its folders.
func isSlow(pkg string, slow []string) bool {
	for _, s := range slow {
		s = strings.TrimPrefix(s, "./")
		if pkg == s || strings.HasSuffix(pkg, "/"+s) {
			return true
		}
	}
	return false
}
