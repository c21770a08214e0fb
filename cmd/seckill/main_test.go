package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMakeBuildStampsTheCommit builds the binary as `make build` does, with
// the Go toolchain's own VCS stamp off (GOFLAGS=-buildvcs=false, as on the
// project's machines), and asks it its version: the commit is the one git
// names, said to have uncommitted changes when the tree has them. Where git
// cannot be run, the build goes on and the binary says it does not know.
func TestMakeBuildStampsTheCommit(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		require.NoError(t, err, "git %v", args)
		return strings.TrimSpace(string(out))
	}
	want := git("rev-parse", "--short", "HEAD")
	if git("status", "--porcelain", "--untracked-files=no") != "" {
		want += " (with uncommitted changes)"
	}

	// The test may itself run under make: its jobserver and level are
	// not the child's.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	env = append(env, "GOFLAGS=-buildvcs=false")
	version := func(makeArgs ...string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "seckill")
		build := exec.Command("make", append([]string{"-C", root, "--no-print-directory", "build-seckill", "BIN=" + bin}, makeArgs...)...)
		build.Env = env
		out, err := build.CombinedOutput()
		require.NoError(t, err, "make build-seckill:\n%s", out)
		out, err = exec.Command(bin, "version").Output()
		require.NoError(t, err)
		_, line, ok := strings.Cut(string(out), "\ncommit  ")
		require.True(t, ok, "%s", out)
		line, _, _ = strings.Cut(line, "\n")
		return line
	}

	require.Equal(t, want, version())
	require.Contains(t, version("GIT="+filepath.Join(t.TempDir(), "no-git")), "unknown")
}
