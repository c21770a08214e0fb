package devstack

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// tmpfsMagic is the f_type statfs reports for a tmpfs.
const tmpfsMagic = 0x01021994

// minShmFree is how much room /dev/shm must have before throwaway data goes
// there: a cluster is 40 MB and every test database a few more, and Docker's
// default /dev/shm is only 64 MB.
const minShmFree = 2 << 30

// TempDir makes a new folder for throwaway service data (tests) and returns
// its path; the caller removes it. Unless TMPDIR is set it prefers /dev/shm
// when that is a roomy tmpfs, because there initdb and PostgreSQL run about
// three times faster than on a disk; otherwise it uses os.TempDir().
func TempDir(pattern string) (string, error) {
	base := os.TempDir()
	if _, set := os.LookupEnv("TMPDIR"); !set {
		var st syscall.Statfs_t
		if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic &&
			st.Bavail*uint64(st.Bsize) >= minShmFree && syscall.Access("/dev/shm", 0o7) == nil {
			base = "/dev/shm"
		}
	}
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", fmt.Errorf("devstack: temp dir: %w", err)
	}
	return dir, nil
}

// ownerFile, in a folder OwnedTempDir makes, holds the pid of the program
// that made it.
const ownerFile = "owner.pid"

// OwnedTempDir is TempDir for a program that may be killed before it can
// remove its folder (a test binary, a fault suite): it writes the program's
// pid into the folder, and first removes the folders matching pattern whose
// program no longer runs. A folder whose owner file is not written yet
// belongs to a program starting now and is left alone.
func OwnedTempDir(pattern string, log *slog.Logger) (string, error) {
	log = logger(log)
	for _, base := range []string{"/dev/shm", os.TempDir()} {
		dirs, _ := filepath.Glob(filepath.Join(base, pattern))
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, ownerFile))
			if err != nil {
				continue
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || Alive(pid) {
				continue
			}
			if err := os.RemoveAll(d); err == nil {
				log.Info("devstack: removed the folder of a program that was killed", "dir", d)
			}
		}
	}
	dir, err := TempDir(pattern)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("devstack: %w", err)
	}
	return dir, nil
}

// serviceDir makes dir, a private service's folder named by its options,
// absolute and present; what names the service in the errors.
func serviceDir(dir, what string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("devstack: %s: the options' Dir is empty", what)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("devstack: %s dir: %w", what, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("devstack: %s dir: %w", what, err)
	}
	return abs, nil
}
