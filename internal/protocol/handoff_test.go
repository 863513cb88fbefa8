package protocol_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/fleet"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// slowSource is a memory source that takes its time, as an NVML read
// beside a whole-host process scan can.
type slowSource struct {
	gpu.Source
	delay time.Duration
}

func (s slowSource) Read(ctx context.Context) (gpu.Reading, error) {
	time.Sleep(s.delay)
	return s.Source.Read(ctx)
}

// TestHandoffClockStartsAtSleepSent: switch → first token runs from the
// /sleep request to the first token; the memory reads around the sleep
// (here 150 ms each) are outside it, and the release is still measured.
func TestHandoffClockStartsAtSleepSent(t *testing.T) {
	bin, err := backend.BuildSim(t.Context())
	require.NoError(t, err)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.OutDir = t.TempDir()
	cfg.Timeouts.StartS, cfg.Timeouts.RequestS = 20, 10
	require.NoError(t, cfg.Validate())
	const delay = 150 * time.Millisecond
	smp := gpu.NewSampler(slowSource{backend.NewSimSource(filepath.Join(dir, "gpu")), delay}, time.Hour)
	rec := record.New([]string{"A", "B"}, map[string]string{"A": "tiny-a", "B": "tiny-b"})
	env := append(backend.SimEnv("tiny", "1", dir, false), os.Environ()...)
	f := fleet.New(cfg, fleet.Options{Command: bin, Env: func(config.Model) []string { return env }, Sampler: smp}, rec)
	defer func() { f.StopAll(); f.CloseIdle() }()
	p := protocol.New(cfg, f, rec, nil)

	ho, err := p.Handoff(t.Context(), "A", "B")
	require.NoError(t, err)
	overhead := time.Duration((ho.ToFirstTokenS - ho.SleepS - ho.WakeS) * float64(time.Second))
	t.Logf("sleep %.3fs, wake %.3fs, switch → first token %.3fs", ho.SleepS, ho.WakeS, ho.ToFirstTokenS)
	assert.Less(t, overhead, delay, "confirmations and a probe's first token, not the memory reads")
	assert.Len(t, rec.Raw().Release["A"], 1, "A's release is measured all the same")
}
