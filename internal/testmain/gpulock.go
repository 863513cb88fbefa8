package testmain

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// GPULockPath is the file whose lock the tests that use the GPU hold while
// they use it: go test ./... runs packages side by side, and the hardware
// tests' copies and allocations (the link probe, PyTorch's 4 GiB) would
// otherwise land inside the protocol's run and move its figures.
func GPULockPath() string { return filepath.Join(os.TempDir(), "wakebench-gpu.lock") }

// LockGPU blocks until this process holds the GPU lock, and returns its
// release. A process that dies releases it with its file descriptors.
func LockGPU() (release func(), err error) {
	f, err := os.OpenFile(GPULockPath(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("GPU lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("GPU lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil // closing the descriptor drops the lock
}
