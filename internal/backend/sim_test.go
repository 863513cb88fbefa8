package backend

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/simgpu"
)

func TestSimSourceReadsTheDevice(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, simgpu.Create(dir, simgpu.Device{Name: "NVIDIA L20", TotalBytes: 48 << 30, ReservedBytes: 1 << 29}))
	require.NoError(t, simgpu.Publish(dir, simgpu.Process{PID: os.Getpid(), UsedBytes: 10 << 30}))
	src := NewSimSource(dir)
	name, err := src.Describe()
	require.NoError(t, err)
	assert.Equal(t, "NVIDIA L20 (simulated)", name)
	r, err := src.Read(t.Context())
	require.NoError(t, err)
	assert.Equal(t, uint64(48<<30), r.Total)
	assert.Equal(t, uint64(10<<30+1<<29), r.Used)
	assert.Equal(t, uint64(10<<30), gpu.ProcsUsed(r, []int{os.Getpid(), 999999}))
}

// counting yields Used = 1, 2, 3, … and fails every failEvery-th read.
// BenchmarkSimSourceRead is one read of the simulated GPU with two
// processes (the work of a sample, without the wake-up around it).
func BenchmarkSimSourceRead(b *testing.B) {
	dir := b.TempDir()
	require.NoError(b, simgpu.Create(dir, simgpu.Device{Name: "Sim", TotalBytes: 16 << 30}))
	for i, pid := range []int{os.Getpid(), os.Getppid()} {
		require.NoError(b, simgpu.Publish(dir, simgpu.Process{PID: pid, Model: "m", UsedBytes: uint64(i+1) << 30}))
	}
	src := NewSimSource(dir)
	b.ReportAllocs()
	for b.Loop() {
		r, err := src.Read(b.Context())
		if err != nil || len(r.Procs) != 2 {
			b.Fatal(r, err)
		}
	}
}
