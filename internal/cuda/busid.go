package cuda

import (
	"fmt"
	"strconv"
	"strings"
)

// NormalizeBusID writes a PCI address as domain:bus:device.function with a four-digit domain
// in lower case, so that the driver's (cuDeviceGetPCIBusId: "0000:3B:00.0") and NVML's
// ("00000000:3B:00.0", a 32-bit domain) name one device alike.
func NormalizeBusID(s string) (string, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("PCI bus id %q: want domain:bus:device.function", s)
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok {
		return "", fmt.Errorf("PCI bus id %q: no function number", s)
	}
	var v [4]uint64
	for i, f := range []string{parts[0], parts[1], dev, fn} {
		n, err := strconv.ParseUint(f, 16, 32)
		if err != nil {
			return "", fmt.Errorf("PCI bus id %q: %w", s, err)
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// DriverVersion writes cuDriverGetVersion's number (1000 × major + 10 × minor) as major.minor,
// as nvidia-smi shows "CUDA Version".
func DriverVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
