package vllmsim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refReport is the part of the L20 reference report the calibration reads.
type refReport struct {
	KVGiB  float64 `json:"kv_gib"`
	Models map[string]struct {
		Name           string `json:"name"`
		RestartInitial median `json:"restart_initial"`
		RestartWarm    median `json:"restart_warm"`
		Sleep          map[string]struct {
			SleepS        median `json:"sleep_s"`
			WakeAPIS      median `json:"wake_api_s"`
			ToFirstTokenS median `json:"to_first_token_s"`
			ResidualGiB   median `json:"residual_gib"`
		} `json:"sleep"`
		Performance []struct {
			Stage        string `json:"stage"`
			Concurrency  int    `json:"concurrency"`
			OutputTPS    median `json:"output_tps"`
			TTFTS        median `json:"ttft_s"`
			TPOTS        median `json:"tpot_s"`
			PromptTokens []int  `json:"prompt_token_counts"`
		} `json:"performance"`
	} `json:"models"`
}

type median struct {
	Median float64 `json:"median"`
}

// Predictions of the time model for one request stream at concurrency c
// with every request starting together (the protocol's rounds).
func ttft(p Physics, prompt, c int) float64 { return p.Prefill(prompt*c) + p.DecodeStep(c) }

func roundTPS(p Physics, prompt, c, maxTokens, perRound int) float64 {
	one := ttft(p, prompt, c) + float64(maxTokens-1)*p.DecodeStep(c)
	waves := math.Ceil(float64(perRound) / float64(c))
	return float64(perRound*maxTokens) / (waves * one)
}

// TestL20ProfileFitResiduals is the l20 profile's goodness of fit: its
// formulas (Physics, at time scale 1) against every median of the L20
// reference report that the model covers, within 15 %. The profile's
// constants were fitted to these same medians, so this shows the formulas
// can represent them and catches a constant changed by mistake; it is no
// validation of the model on data it was not fitted to.
func TestL20ProfileFitResiduals(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "l20-reference-report.json"))
	require.NoError(t, err)
	var ref refReport
	require.NoError(t, json.Unmarshal(b, &ref))
	prof, err := LookupProfile("l20")
	require.NoError(t, err)

	within := func(t *testing.T, what string, want, got float64) {
		t.Helper()
		t.Logf("%-32s reference %10.4g  predicted %10.4g  %+6.1f%%", what, want, got, (got/want-1)*100)
		assert.InEpsilonf(t, want, got, 0.15, "%s: reference median %.4g, l20 profile predicts %.4g (%+.1f%%)", what, want, got, (got/want-1)*100)
	}
	for label, rm := range ref.Models {
		t.Run(label, func(t *testing.T) {
			model, err := prof.Model(rm.Name)
			require.NoError(t, err)
			p := Physics{GPU: prof.GPU, Model: model, KVBytes: uint64(ref.KVGiB * GiB)}
			prompt := rm.Performance[0].PromptTokens[0]

			within(t, "restart_initial", rm.RestartInitial.Median, p.Start(false)+ttft(p, prompt, 1))
			within(t, "restart_warm", rm.RestartWarm.Median, p.Start(true)+ttft(p, prompt, 1))

			l1, l2 := rm.Sleep["1"], rm.Sleep["2"]
			within(t, "sleep.1.sleep_s", l1.SleepS.Median, p.Sleep(1))
			wake1 := p.WakeWeights(1) + p.WakeKV()
			within(t, "sleep.1.wake_api_s", l1.WakeAPIS.Median, wake1)
			within(t, "sleep.1.to_first_token_s", l1.ToFirstTokenS.Median, wake1+ttft(p, prompt, 1))
			within(t, "sleep.1.residual_gib", l1.ResidualGiB.Median, model.ResidualGiB)
			within(t, "sleep.2.sleep_s", l2.SleepS.Median, p.Sleep(2))
			wake2 := p.WakeWeights(2) + p.Reload() + p.WakeKV()
			within(t, "sleep.2.wake_api_s", l2.WakeAPIS.Median, wake2)
			within(t, "sleep.2.to_first_token_s", l2.ToFirstTokenS.Median, wake2+ttft(p, prompt, 1))
			within(t, "sleep.2.residual_gib", l2.ResidualGiB.Median, model.ResidualGiB)

			for _, perf := range rm.Performance {
				c := perf.Concurrency
				name := perf.Stage + " conc " + string(rune('0'+c))
				within(t, name+" ttft_s", perf.TTFTS.Median, ttft(p, prompt, c))
				within(t, name+" tpot_s", perf.TPOTS.Median, p.DecodeStep(c))
				within(t, name+" output_tps", perf.OutputTPS.Median, roundTPS(p, prompt, c, 128, 8))
			}
		})
	}
}
