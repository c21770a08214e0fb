package devstack

// What a private PostgreSQL needs from this machine before it starts: the
// account that owns its files when we are root, no stale postmaster.pid, and
// the binaries of the wanted version.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// postgresCredential returns nil when we are not root. As root it returns
// the postgres account's credential and makes dir usable by it: owned by it,
// and every parent traversable.
func postgresCredential(dir string, log *slog.Logger) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(postgresUser)
	if err != nil {
		return nil, fmt.Errorf("devstack: running as root, and PostgreSQL refuses to run as root, but there is no %q user to run it as (%w): install PostgreSQL with `apt-get install postgresql` (it creates the user), or run as a normal user", postgresUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("devstack: user %s: %w", postgresUser, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != cred.Gid {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}

	// The folder itself, and whatever of the cluster another owner left.
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, fmt.Errorf("devstack: give %s to %s: %w", dir, postgresUser, err)
	}
	if err := chownTree(filepath.Join(dir, "data"), int(uid), int(gid)); err != nil {
		return nil, err
	}
	// The postgres user must be able to walk down to dir.
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("devstack: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, st.Mode().Perm()|0o001); err != nil {
				return nil, fmt.Errorf("devstack: let %s traverse %s: %w", postgresUser, p, err)
			}
			log.Info("devstack: made folder traversable for the postgres user", "dir", p)
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	return cred, nil
}

// chownTree gives root's files under dir to uid:gid; a missing dir is fine.
func chownTree(dir string, uid, gid int) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && (int(st.Uid) != uid || int(st.Gid) != gid) {
			return os.Lchown(path, uid, gid)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devstack: give %s to %s: %w", dir, postgresUser, err)
	}
	return nil
}

// clearStalePid removes a postmaster.pid left by a postmaster that no longer
// runs. PostgreSQL itself ignores a pid file whose process is gone, but not
// one whose pid now belongs to some other process, which is common in
// containers where pids are small and reused.
func clearStalePid(dataDir string) error {
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devstack: read %s: %w", pidFile, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	if pid > 0 && Alive(pid) && isPostmasterOf(pid, dataDir) {
		return fmt.Errorf("devstack: a PostgreSQL (pid %d) already runs on %s: stop it first, or use another folder", pid, dataDir)
	}
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("devstack: remove stale %s: %w", pidFile, err)
	}
	return nil
}

// isPostmasterOf reports whether pid is a postgres whose command line names
// dataDir. When /proc cannot tell, it assumes yes, the safe answer.
func isPostmasterOf(pid int, dataDir string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return true
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	if len(args) == 0 || !bytes.Contains(args[0], []byte("postgres")) {
		return false
	}
	for _, a := range args {
		if string(a) == dataDir {
			return true
		}
	}
	return false
}

// postgresBinaries finds a directory holding postgres and initdb: the one of
// version want when a cluster of that version exists, else the newest of
// /usr/lib/postgresql/*/bin (Debian), else the one on PATH.
func postgresBinaries(want, dataDir string) (dir, version string, err error) {
	type cand struct{ dir, version string }
	var cands []cand
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "postgres")) && fileExists(filepath.Join(d, "initdb")) {
			cands = append(cands, cand{d, filepath.Base(filepath.Dir(d))})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int { return compareVersions(b.version, a.version) })
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			d := filepath.Dir(real)
			if fileExists(filepath.Join(d, "initdb")) {
				if v, err := postgresVersion(real); err == nil {
					cands = append(cands, cand{d, v})
				}
			}
		}
	}
	if len(cands) == 0 {
		return "", "", errors.New("devstack: PostgreSQL server binaries (postgres, initdb) not found in /usr/lib/postgresql/*/bin or on PATH: install them with `apt-get install postgresql` (or run `make deps`)")
	}
	if want == "" {
		return cands[0].dir, cands[0].version, nil
	}
	for _, c := range cands {
		if c.version == want {
			return c.dir, c.version, nil
		}
	}
	return "", "", fmt.Errorf("devstack: the cluster in %s was made by PostgreSQL %s, but only PostgreSQL %s is installed: install postgresql-%s, or delete %s to start with an empty database",
		dataDir, want, cands[0].version, want, filepath.Dir(dataDir))
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// postgresVersion runs `postgres --version` and returns the major version.
func postgresVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", err
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("unexpected version %q", out)
	}
	return string(m[1]), nil
}

// compareVersions orders major versions numerically ("9.6" < "15").
func compareVersions(a, b string) int {
	fa, _ := strconv.ParseFloat(a, 64)
	fb, _ := strconv.ParseFloat(b, 64)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return strings.Compare(a, b)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
