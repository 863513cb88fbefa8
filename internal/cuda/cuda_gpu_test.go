//go:build gpu

package cuda

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/testmain"
)

// On a GPU (go test -tags gpu ./internal/cuda): memory moves where it is told, and the
// device's free memory shows an allocation.
func TestRealRoundTrip(t *testing.T) {
	if why := config.NoGPUHardware(os.Getenv); why != "" {
		t.Skip(why)
	}
	release, err := testmain.LockGPU() // not while the root package's protocol runs
	require.NoError(t, err)
	defer release()
	d, err := Open(0)
	if errors.Is(err, ErrNoDriver) && testing.Short() {
		t.Skipf("-short: needs an NVIDIA GPU and its driver: %v", err)
	}
	require.NoError(t, err, "-tags gpu needs an NVIDIA GPU and its driver; go test -short -tags gpu skips the hardware tests")
	defer d.Close()
	t.Logf("CUDA device 0: %s, bus %s, driver API %s", d.Name, d.BusID, DriverVersion(d.Driver))
	const n = 64 << 20
	free0, _, err := d.MemInfo()
	require.NoError(t, err)
	a, err := d.Alloc(n)
	require.NoError(t, err)
	b, err := d.Alloc(n)
	require.NoError(t, err)
	free1, _, err := d.MemInfo()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, free0-free1, uint64(2*n), "two 64 MiB allocations show in the free memory")
	h, err := d.AllocHost(n)
	require.NoError(t, err)
	defer d.FreeHost(h)
	require.NoError(t, d.Fill(a, 0x5a5a5a5a, n))
	require.NoError(t, d.CopyDtoD(b, a, n))
	require.NoError(t, d.CopyDtoH(h, 0, b, n))
	assert.True(t, bytes.Equal(h.Bytes(), bytes.Repeat([]byte{0x5a}, n)), "fill → device copy → host copy")
	copy(h.Bytes(), bytes.Repeat([]byte{7}, n))
	require.NoError(t, d.CopyHtoD(a, h, 0, n))
	clear(h.Bytes())
	require.NoError(t, d.CopyDtoH(h, 0, a, n))
	assert.Equal(t, byte(7), h.Bytes()[n-1])
	require.NoError(t, d.Free(a))
	require.NoError(t, d.Free(b))
}
