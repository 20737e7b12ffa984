package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// dbDiskBytes is about what one PostgreSQL database takes on disk (a copy
// of template0, the same size as a fresh template1; PostgreSQL 15 to 18), with room for the WAL.
const dbDiskBytes = 9 << 20

// btrfsMagic is statfs's f_type of btrfs.
const btrfsMagic = 0x9123683E

// runScale creates n Databases with the provider's default flags (its
// default poll too), waits until all are Ready and measures the steady
// state over two poll intervals: the run that answers what n Databases
// cost in the steady state.
func runScale(ctx context.Context, c cfg, bin, logDir string, n int) (*provResult, error) {
	if c.steadyTmp != "" {
		// Every component's directory comes from os.TempDir, and the
		// processes started from here inherit it.
		if err := os.Setenv("TMPDIR", c.steadyTmp); err != nil {
			return nil, err
		}
	}
	if err := checkDisk(n); err != nil {
		return nil, err
	}
	sc := c
	sc.poll = time.Minute // the provider's default
	sc.window = 2 * sc.poll
	sc.extra = nil
	fmt.Printf("==> provider at scale, N=%d, default flags (--poll=%s) (fresh components)\n", n, sc.poll)
	return withEnv(ctx, dbStack, func(b *benchEnv) (*provResult, error) {
		return runProvider(ctx, sc, b, bin, logDir, n, defaultRate, true)
	})
}

// checkDisk refuses to start when the directory the components live in
// ($TMPDIR) cannot hold n PostgreSQL databases.
func checkDisk(n int) error {
	dir := os.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return err
	}
	free := st.Bavail * uint64(st.Bsize) //nolint:gosec // block size is positive
	need := uint64(n) * dbDiskBytes      //nolint:gosec // n is positive
	if st.Type == btrfsMagic {
		// hack/bench-fs.sh's zstd compression: the copies
		// measured at less than half their size.
		need /= 2
	}
	if free < need {
		return fmt.Errorf("%d databases need about %d GiB in %s (TMPDIR), which has %d GiB free: point TMPDIR at a bigger filesystem, or at a compressed one (sudo hack/bench-fs.sh makes a zstd-compressed btrfs loop mount and prints the TMPDIR to use)",
			n, need>>30, dir, free>>30)
	}
	return nil
}
