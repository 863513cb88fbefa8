package backend

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// maxSimHostGiB bounds the pinned host memory one vllmsim level-1 sleep of
// a CI config really allocates (the modelled backup × sim.host_scale; the
// call's transient staging buffer, a quarter of that, comes on top).
// Paging in more makes every sleep a memset the runner's other jobs slow
// down: make k8s at host_scale 1 paged in 7.5 GiB per sleep of the 4B
// model, and its handoffs took 13–15 s under make stress's CPU hog
// against 0.1 s quiet, failing max_pod_switch_routable_s on time alone.
const maxSimHostGiB = 1.0

// TestCIConfigsBoundTheSimsHostMemory holds every config of testdata/
// that runs on vllmsim (those the Makefile and .ci/run name among them) to
// maxSimHostGiB per model and level-1 sleep, on every simulated node it
// names. A config for real vLLM (command "vllm") or for vllmsim's
// real-device mode (sim.device "cuda") runs on a GPU runner only, and
// example-config.json lists every key for docs/configuration.md but no
// make target runs it.
func TestCIConfigsBoundTheSimsHostMemory(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "*.json"))
	require.NoError(t, err)
	sims := 0
	for _, f := range files {
		name := filepath.Base(f)
		switch name {
		case "l20-reference-report.json": // a report, not a config
			continue
		case "example-config.json": // every key, documented; loaded by config's tests, never run
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		cfg := config.SimDefault() // as a build without the gpu tag, which make runs them in
		require.NoError(t, config.Decode(b, &cfg), name)
		if cfg.Command != "vllmsim" || cfg.Sim.Device == "cuda" {
			// Real vLLM, or vllmsim in real-device mode (device.json, make device-check): a GPU
			// runner's, never CI's, and its pinned backups are the real weights' whatever
			// sim.host_scale says.
			continue
		}
		sims++
		t.Run(name, func(t *testing.T) {
			profiles := []string{cfg.Sim.Profile}
			for _, n := range cfg.Fleet.LocalNodes {
				if n.Profile != "" {
					profiles = append(profiles, n.Profile)
				}
			}
			for _, pn := range profiles {
				prof, err := vllmsim.LookupProfile(pn)
				require.NoError(t, err)
				for _, m := range cfg.Models {
					pm, err := prof.Model(m.Name)
					require.NoError(t, err)
					host := pm.WeightGiB * cfg.Sim.HostScale
					assert.LessOrEqual(t, host, maxSimHostGiB,
						"profile %s, model %s (%.2f GiB of weights): a level-1 sleep really pins %.2f GiB at sim.host_scale %g; set sim.host_scale ≤ %.3g in testdata/%s",
						pn, m.Name, pm.WeightGiB, host, cfg.Sim.HostScale, maxSimHostGiB/pm.WeightGiB, name)
				}
			}
		})
	}
	assert.GreaterOrEqual(t, sims, 6, "testdata's vllmsim configs (demo, k8s, fleet, soak, gate-power…)")
}
