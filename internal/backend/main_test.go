package backend

import (
	"testing"

	"github.com/wakebench/wakebench/internal/testmain"
)

// Under the gpu tag only the hardware tests run (as scripts/device-check.sh runs them).
func TestMain(m *testing.M) {
	testmain.Main(m, "^Test(RealDeviceFacts|NVMLSeesMemoryMove|SamplerRate|RealEnergyCounter|RealLinkProbe)$")
}
