package localstack

import (
	"fmt"
	"os"
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
		return "", fmt.Errorf("localstack: temp dir: %w", err)
	}
	return dir, nil
}
