package cuda

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A library that is not there is ErrNoDriver, naming the driver to install and what dlopen
// said, never a crash.
func TestMissingLibraryNamesTheDriver(t *testing.T) {
	err := load("libcuda-wakebench-absent.so.1")
	require.ErrorIs(t, err, ErrNoDriver)
	assert.Contains(t, err.Error(), "install the NVIDIA driver")
	assert.Contains(t, err.Error(), "libcuda-wakebench-absent.so.1", "dlopen's reason names the file it could not open")
}

// Open on this machine: without the driver it is ErrNoDriver (the no-GPU case CI sees); with
// it, the device opens and answers.
func TestOpen(t *testing.T) {
	d, err := Open(0)
	if _, statErr := os.Stat("/proc/driver/nvidia/version"); statErr != nil {
		require.Error(t, err, "no NVIDIA kernel driver here (%v), yet Open succeeded", statErr)
		if !errors.Is(err, ErrNoDriver) {
			var ce *Error
			require.ErrorAs(t, err, &ce, "a driver library without a kernel driver fails in cuInit")
		}
		return
	}
	require.NoError(t, err)
	defer d.Close()
	_, total, err := d.MemInfo()
	require.NoError(t, err)
	assert.Positive(t, total)
}

func TestErrorText(t *testing.T) {
	assert.Equal(t, "cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)", (&Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}).Error())
	assert.Equal(t, "cuInit: CUresult (999)", (&Error{Call: "cuInit", Code: 999}).Error())
}

func TestBusIDs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0000:3B:00.0", "0000:3b:00.0"},     // cuDeviceGetPCIBusId
		{"00000000:3B:00.0", "0000:3b:00.0"}, // NVML's busId: a 32-bit domain
		{"0001:c1:00.0", "0001:c1:00.0"},
	} {
		got, err := NormalizeBusID(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
	for _, bad := range []string{"", "3b:00.0", "0000:3g:00.0", "0000:3b:00"} {
		_, err := NormalizeBusID(bad)
		assert.Error(t, err, bad)
	}
}

func TestDriverVersion(t *testing.T) {
	assert.Equal(t, "12.8", DriverVersion(12080))
	assert.Equal(t, "13.0", DriverVersion(13000))
}
