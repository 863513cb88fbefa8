package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/pool"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simtest"
	"github.com/wakebench/wakebench/internal/testmain"
)

// simPool is a pool of vllmsim's tiny A and B whose memory source is
// wrapped by wrap, with its record and protocol; stopped when t ends.
func simPool(t *testing.T, wrap func(gpu.Source) gpu.Source, handoffs int) (*pool.Pool, *record.Recorder, *protocol.Env) {
	t.Helper()
	return simtest.Env(t, wrap, func(cfg *config.Config) { cfg.Protocol.Handoffs = handoffs })
}

// TestHandoffClockStartsAtSleepSent: switch → first token runs from the
// /sleep request to the first token; the memory reads around the sleep
// (here 300 ms each) are outside it, by process or by device delta (whose
// read of the device asleep must come before the wake), and the release is
// still measured.
func TestHandoffClockStartsAtSleepSent(t *testing.T) {
	testmain.Long(t)
	const delay = 300 * time.Millisecond
	for name, wrap := range map[string]func(gpu.Source) gpu.Source{
		"process": func(s gpu.Source) gpu.Source { return simtest.SlowReads{Source: s, Delay: delay} },
		"device-delta": func(s gpu.Source) gpu.Source {
			return simtest.NoProcs{Source: simtest.SlowReads{Source: s, Delay: delay}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, rec, p := simPool(t, wrap, 1)
			handoffsOut, err := protocol.Switch{Env: p}.Run(t.Context(), t.Logf)
			handoffs := handoffsOut.Value
			require.NoError(t, err)
			require.Len(t, handoffs, 2, "the initial activation and one handoff")
			ho := handoffs[1]
			overhead := time.Duration((ho.ToFirstTokenS - ho.SleepS - ho.WakeS) * float64(time.Second))
			t.Logf("%s→%s: sleep %.3fs, wake %.3fs, switch → first token %.3fs", ho.From, ho.To, ho.SleepS, ho.WakeS, ho.ToFirstTokenS)
			assert.Less(t, overhead, delay, "confirmations and a probe's first token, not the memory reads")
			assert.Equal(t, name, rec.Raw().Attribution[ho.From])
			assert.Len(t, rec.Raw().Release[ho.From], 1, "the release is measured all the same")
		})
	}
}

// TestNoInferenceToASleepingModel: a probe, a serving round and a serving
// phase on a model the harness put to sleep are refused before any request
// is sent (an old vLLM crashed on one), and nothing is counted as executed.
func TestNoInferenceToASleepingModel(t *testing.T) {
	f, rec, p := simPool(t, func(s gpu.Source) gpu.Source { return s }, 1)
	require.NoError(t, f.Activate(t.Context(), "A"))
	_, err := f.Run(t.Context(), "A", pool.Sleep(1))
	require.NoError(t, err)
	before := rec.Raw().Requests

	_, err = f.Requests().Probe(t.Context(), "A")
	assert.ErrorContains(t, err, "refusing to send inference")
	_, err = f.Requests().Serve(t.Context(), "A", 1, 1, 4)
	assert.ErrorContains(t, err, "refusing to send inference")
	_, err = p.Serve(t.Context(), "A", "baseline", t.Logf)
	assert.ErrorContains(t, err, "refusing to send inference")
	assert.Equal(t, before, rec.Raw().Requests, "no request was sent")
	assert.True(t, f.Asleep("A") && f.Running("A"), "A still sleeps, its server alive")
}

// TestDeviceDeltaAttribution: where the memory source lists none of the
// servers' processes, residual and release come from the device's changes
// (only one model changes state at a time) and say so. The simulated
// device shows each sleep's release only 100 ms after /sleep answered
// (fault late-release), so a device read taken at once after the sleep
// sees nothing released: the figures by device delta still equal the
// per-process ones, and the release is the model's.
func TestDeviceDeltaAttribution(t *testing.T) {
	testmain.Long(t)
	measure := func(wrap func(gpu.Source) gpu.Source) (record.Raw, []record.Cycle) {
		_, rec, p := simtest.Env(t, wrap, func(cfg *config.Config) {
			cfg.Protocol.Handoffs = 1
			cfg.Protocol.SettleS = 0.5 // the release lands within the hold
			cfg.Models[0].SimFaults = "late-release=0.1"
		})
		_, err := protocol.Restart{Env: p}.Run(t.Context(), "A", t.Logf)
		require.NoError(t, err)
		cyclesOut, err := protocol.Sleep{Env: p, Level: 1}.Run(t.Context(), "A", t.Logf)
		cycles := cyclesOut.Value
		require.NoError(t, err)
		return rec.Raw(), cycles
	}
	byProcess, pc := measure(func(s gpu.Source) gpu.Source { return s })
	byDevice, dc := measure(func(s gpu.Source) gpu.Source { return simtest.NoProcs{Source: s} })
	assert.Equal(t, "process", byProcess.Attribution["A"])
	assert.Equal(t, "device-delta", byDevice.Attribution["A"])
	assert.Empty(t, byDevice.MemoryNote, "nothing is missing")
	require.Len(t, dc, len(pc))
	for i := range pc {
		assert.InDelta(t, pc[i].ResidualGiB, dc[i].ResidualGiB, 1e-6, "cycle %d residual", i+1)
	}
	require.Len(t, byDevice.Release["A"], len(byProcess.Release["A"]))
	for i := range byProcess.Release["A"] {
		assert.InDelta(t, byProcess.Release["A"][i], byDevice.Release["A"][i], 1e-6, "release %d", i+1)
		assert.Greater(t, byDevice.Release["A"][i], 50.0, "release %d: the weights and KV cache went", i+1)
	}
}

// splitSource shows the simulated GPU as two, every process holding half
// its memory on each, as a model in tensor parallel over two GPUs does.
type splitSource struct{ gpu.Source }

func (s splitSource) Read(ctx context.Context) (gpu.Reading, error) {
	r, err := s.Source.Read(ctx)
	if err != nil {
		return r, err
	}
	half := func() gpu.Reading {
		d := gpu.Reading{Used: r.Used / 2, Total: r.Total / 2, Procs: map[int]uint64{}}
		for pid, b := range r.Procs {
			d.Procs[pid] = b / 2
		}
		return d
	}
	return gpu.Merge([]gpu.Reading{half(), half()}), nil
}

// TestPerGPUFigures: on a run of two GPUs every residual and level-1
// release is also given per GPU, by process or by device delta, and they
// add up to the model's.
func TestPerGPUFigures(t *testing.T) {
	testmain.Long(t)
	for name, wrap := range map[string]func(gpu.Source) gpu.Source{
		"process":      func(s gpu.Source) gpu.Source { return splitSource{s} },
		"device-delta": func(s gpu.Source) gpu.Source { return simtest.NoProcs{Source: splitSource{s}} },
	} {
		t.Run(name, func(t *testing.T) {
			_, rec, p := simPool(t, wrap, 1)
			_, err := protocol.Restart{Env: p}.Run(t.Context(), "A", t.Logf)
			require.NoError(t, err)
			cyclesOut, err := protocol.Sleep{Env: p, Level: 1}.Run(t.Context(), "A", t.Logf)
			cycles := cyclesOut.Value
			require.NoError(t, err)
			raw := rec.Raw()
			assert.Equal(t, name, raw.Attribution["A"])
			for _, c := range cycles {
				require.Len(t, c.ResidualPerGPU, 2)
				assert.InDelta(t, c.ResidualGiB, c.ResidualPerGPU[0]+c.ResidualPerGPU[1], 1e-6, "the GPUs' residuals add up")
				assert.InDelta(t, c.ResidualPerGPU[0], c.ResidualPerGPU[1], 1e-6, "half on each")
			}
			require.Len(t, raw.ReleasePerGPU["A"], len(raw.Release["A"]))
			for i, pcts := range raw.ReleasePerGPU["A"] {
				require.Len(t, pcts, 2)
				assert.InDelta(t, raw.Release["A"][i], pcts[0], 1e-3, "each GPU released the model's share")
			}
		})
	}
}
