package simgpu

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPublishAndRead(t *testing.T) {
	dir := t.TempDir()
	d := Device{Name: "G", TotalBytes: 16 << 30, ReservedBytes: 1 << 28}
	require.NoError(t, Create(dir, d))
	got, err := ReadDevice(dir)
	require.NoError(t, err)
	assert.Equal(t, d, got)

	me := os.Getpid()
	require.NoError(t, Publish(dir, Process{PID: me, Model: "m", UsedBytes: 3 << 30}))
	require.NoError(t, Publish(dir, Process{PID: me, Model: "m", UsedBytes: 1 << 30}), "replaces")
	procs, err := Processes(dir)
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, uint64(1<<30), procs[0].UsedBytes)
	assert.Equal(t, uint64(1<<30+1<<28), Used(d, procs))

	require.NoError(t, Remove(dir, me))
	require.NoError(t, Remove(dir, me), "removing twice is fine")
	procs, _ = Processes(dir)
	assert.Empty(t, procs)
}

func TestDeadProcessFreesItsMemory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Create(dir, Device{Name: "G", TotalBytes: 1 << 30}))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	dead := cmd.Process.Pid
	require.NoError(t, Publish(dir, Process{PID: dead, UsedBytes: 1 << 20}))
	procs, err := Processes(dir)
	require.NoError(t, err)
	assert.Empty(t, procs, "a process that exited holds no device memory")
	_, err = os.Stat(procPath(dir, dead))
	assert.ErrorIs(t, err, os.ErrNotExist, "its entry is cleaned up")
}

func TestCreateRejectsZeroMemory(t *testing.T) {
	assert.Error(t, Create(t.TempDir(), Device{Name: "G"}))
	_, err := ReadDevice(t.TempDir())
	assert.Error(t, err)
}
