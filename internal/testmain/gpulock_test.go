package testmain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLockGPUExcludes: a second holder waits until the first releases.
// Ordered by channels, not by the clock: the second's acquisition is
// checked not to happen while the first holds the lock, then to happen once
// it is released.
func TestLockGPUExcludes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	release, err := LockGPU()
	require.NoError(t, err)
	got := make(chan func(), 1)
	go func() {
		r, err := LockGPU() // another descriptor: flock excludes it as another process
		if err != nil {
			t.Error(err)
			r = func() {}
		}
		got <- r
	}()
	select {
	case r := <-got:
		r()
		t.Fatal("the lock was taken twice")
	case <-time.After(100 * time.Millisecond): // still waiting, as it must
	}
	release()
	select {
	case r := <-got:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not handed on after its release")
	}
}
