package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestLockedMemoryOfThisProcess locks 1 MiB of the test process and sees
// VmLck grow by it (RLIMIT_MEMLOCK is 8 MiB by default since Linux 5.16,
// 64 KiB before: the test skips where the sandbox refuses).
func TestLockedMemoryOfThisProcess(t *testing.T) {
	before, err := ProcessMemory(os.Getpid())
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	if err := unix.Mlock(buf); err != nil {
		t.Skipf("mlock refused here (%v): TestHostMemoryParsesStatus covers the parser", err)
	}
	defer unix.Munlock(buf)
	after, err := ProcessMemory(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after.Locked-before.Locked, uint64(1<<20), "the locked MiB shows in VmLck")
	assert.GreaterOrEqual(t, after.RSS, after.Locked-before.Locked, "locked pages are resident")
	require.NoError(t, unix.Munlock(buf))
	unlocked, err := ProcessMemory(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, before.Locked, unlocked.Locked, "and leaves it when unlocked")
}

// TestHostMemoryParsesStatus sums RSS, VmLck, VmPin and VmSwap over a
// tree from fixture /proc/PID/status files (VmPin needs RDMA or io_uring
// to be non-zero on a live process).
func TestHostMemoryParsesStatus(t *testing.T) {
	root := t.TempDir()
	status := func(pid int, rss, lck, pin, swap int) {
		dir := filepath.Join(root, fmt.Sprint(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		body := fmt.Sprintf("Name:\tpython3\nPid:\t%d\nVmLck:\t%8d kB\nVmPin:\t%8d kB\nVmRSS:\t%8d kB\nVmSwap:\t%8d kB\n", pid, lck, pin, rss, swap)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "status"), []byte(body), 0o644))
	}
	status(100, 2_000_000, 0, 0, 0)                // the API server
	status(101, 50_000_000, 27_000_000, 1024, 512) // the engine core with a pinned weight backup
	fs, err := procfs.NewFS(root)
	require.NoError(t, err)
	var procs []procfs.Proc
	for _, pid := range []int{100, 101} {
		p, err := fs.Proc(pid)
		require.NoError(t, err)
		procs = append(procs, p)
	}
	m := treeMemory(procs)
	assert.Equal(t, HostMemory{RSS: 52_000_000 << 10, Locked: 27_000_000 << 10, Pinned: 1024 << 10, Swap: 512 << 10}, m)
}

func TestHostOfTheGroup(t *testing.T) {
	s, _ := sh(t, `sleep 30 & sleep 30`)
	require.Eventually(t, func() bool { p, _ := s.PIDs(); return len(p) >= 3 }, 2*time.Second, 10*time.Millisecond)
	m, err := s.Host()
	require.NoError(t, err)
	assert.Greater(t, m.RSS, uint64(3*100<<10), "three processes hold at least 100 KiB each")
	assert.Zero(t, m.Locked, "sh and sleep lock nothing")
	assert.Equal(t, m.RSS, s.PeakRSS())
}
