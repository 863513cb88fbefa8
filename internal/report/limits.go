package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/record"
)

// limits computes a model's physical-limit figures from its weight size,
// the GPU's facts and what the run measured; nil without any input.
func limits(raw record.Raw, label string, m *Model) *Limits {
	w, haveW := raw.Weights[label]
	f := raw.GPUFacts
	if !haveW && f == nil {
		return nil
	}
	lim := &Limits{WeightGiB: w.GiB, WeightSource: w.Source}
	var missing []string
	if !haveW {
		missing = append(missing, "weight size (no \"Model loading took … GiB\" line in the server log)")
	}
	scale, how, scaled := 1.0, "NVML", ""
	if raw.Simulated != nil {
		scale = raw.Simulated.TimeScale
		how = fmt.Sprintf("simulated GPU (vllmsim profile %s), as NVML would report it", raw.Simulated.Profile)
		scaled = fmt.Sprintf("; floor × time scale %g, like every simulated time", scale)
		if raw.Simulated.RealDevice {
			// Real-device mode: the copies are the GPU's own, never scaled.
			scale, how, scaled = 1, "NVML (vllmsim in real-device mode: the copies are the GPU's)", ""
		}
	}
	floor := func(gbps float64) float64 { return w.GiB * GiB / (gbps * 1e9) * scale }
	frac := func(floor, measured float64) float64 {
		if floor > 0 && measured > 0 {
			return floor / measured
		}
		return 0
	}

	if l1 := m.Sleep[record.LevelKey(1)]; l1 != nil && l1.WakeAPIS.N > 0 {
		lim.L1WakeS, lim.L1SleepS = l1.WakeAPIS.Median, l1.SleepS.Median
		lim.wakeMeasured = true
	}
	for _, p := range m.Performance {
		if p.Stage == record.PhaseBaseline && p.Concurrency == 1 && p.TPOTS.N > 0 {
			lim.TPOTC1S, lim.tpotMeasured = p.TPOTS.Median, true
		}
	}
	switch {
	case f == nil:
		missing = append(missing, "GPU facts (memory source is not nvml or sim)")
	default:
		if lim.PCIeNominalGBps = f.PCIeGBps; lim.PCIeNominalGBps > 0 {
			link := fmt.Sprintf("PCIe gen %d x%d (maximum link)", f.MaxPCIeGen, f.MaxPCIeWidth)
			if f.MaxPCIeGen <= 0 || f.MaxPCIeWidth <= 0 {
				// gpu.DeviceFacts.PCIeLimitGBps fell back to the current link.
				link = fmt.Sprintf("PCIe gen %d x%d (the current link: NVML gave no maximum, and an idle link trains down, so this floor may be too slow)", f.PCIeGen, f.PCIeWidth)
			}
			lim.PCIeGBps, lim.PCIeBasis = lim.PCIeNominalGBps, "nominal"
			lim.PCIeSource = fmt.Sprintf("%s: %s, raw one-direction rate after line coding%s", how, link, scaled)
		}
		if l, ok := record.SlowestLink(raw.Links); ok {
			lim.PCIeGBps, lim.PCIeBasis, lim.D2HGBps = l.H2DGBps, "measured", l.D2HGBps
			if l.Simulated {
				lim.PCIeBasis = "simulated" // the profile's rates: no copy was made
			}
			lim.PCIeSource = fmt.Sprintf("link probe, host→device (%s, %s)%s", l.GPU, l.Source, scaled)
			if raw.LinkNote != "" { // some GPU of the run was not probed
				lim.PCIeSource += "; " + raw.LinkNote
			}
			lim.LinkFractionOfNominal = l.H2DFractionOfNominal // of that GPU's own nominal link
		}
		if lim.PCIeGBps <= 0 {
			missing = append(missing, "PCIe generation and width")
		}
		if lim.HBMGBps = f.MemoryGBps; lim.HBMGBps > 0 {
			lim.HBMSource = fmt.Sprintf("%s: %d-bit memory bus × %d MHz maximum memory clock × 2%s", how, f.MemBusWidthBits, f.MaxMemClockMHz, scaled)
		} else {
			missing = append(missing, "memory bus width and clock")
		}
	}
	if haveW && lim.PCIeGBps > 0 {
		lim.L1WakeFloorS = floor(lim.PCIeGBps)
		lim.L1WakeFractionOfFloor = frac(lim.L1WakeFloorS, lim.L1WakeS)
	}
	if haveW && lim.PCIeNominalGBps > 0 {
		lim.L1WakeFractionOfNominal = frac(floor(lim.PCIeNominalGBps), lim.L1WakeS)
	}
	if haveW && lim.D2HGBps > 0 {
		lim.L1SleepFloorS = floor(lim.D2HGBps)
		lim.L1SleepFractionOfLink = frac(lim.L1SleepFloorS, lim.L1SleepS)
	}
	if haveW && lim.HBMGBps > 0 {
		lim.TPOTFloorS = floor(lim.HBMGBps)
		lim.TPOTFractionOfHBM = frac(lim.TPOTFloorS, lim.TPOTC1S)
	}
	var notes, notRun []string
	if len(missing) > 0 {
		notes = append(notes, "unknown: "+strings.Join(missing, "; "))
	}
	if lim.L1WakeS == 0 {
		notRun = append(notRun, "level-1 wake (no successful level-1 cycle)")
	}
	if lim.TPOTC1S == 0 {
		notRun = append(notRun, "TPOT at concurrency 1 (no baseline at concurrency 1)")
	}
	if len(notRun) > 0 {
		notes = append(notes, "not measured: "+strings.Join(notRun, "; "))
	}
	if lim.L1WakeFractionOfFloor > MeasuredSlack && lim.PCIeBasis == "measured" {
		notes = append(notes, "level-1 wake faster than the measured link allows: the weight size is wrong, or the wake copied less than the weights")
	} else if lim.L1WakeFractionOfFloor > 1 && lim.PCIeBasis != "measured" {
		notes = append(notes, "level-1 wake faster than the PCIe floor: the host link is not PCIe (NVLink-C2C?) or the weight size is wrong")
	}
	if raw.Simulated != nil && raw.Simulated.RealDevice && lim.TPOTFractionOfHBM > 0 {
		notes = append(notes, RealDeviceNote)
	}
	switch {
	case lim.TPOTFractionOfHBM > 1 && slices.Contains(raw.Speculative, label):
		// A verified step emits the accepted draft tokens and one more for
		// one read of the target's weights: the one-read floor is per step,
		// not per token.
		notes = append(notes, SpeculativeNote)
	case lim.TPOTFractionOfHBM > 1:
		notes = append(notes, "TPOT below the memory floor: a decode step reads less than every weight (mixture of experts?) or the weight size is wrong")
	}
	lim.Note = strings.Join(notes, ". ")
	return lim
}

// MeasuredSlack is how far above a measured link's median rate a wake may copy before the
// report says the weights or the wake are not what they seem: the probe's trials vary by a few
// percent, and a wake's one large copy can beat its 64 MiB ones.
const MeasuredSlack = 1.1

// SpeculativeNote is the physical limits' note of a model that decodes
// speculatively with its TPOT below the one-read floor: a fact of the
// method, not a fault of the run.
const SpeculativeNote = "speculative decoding: a decode step emits every accepted draft token and one more for one read of the weights, so TPOT below the one-read memory floor (a fraction above 1) is expected"

// RealDeviceNote is the physical limits' note in vllmsim's real-device mode.
const RealDeviceNote = "real-device mode: a step reads the weights as a device-to-device copy, which writes as many bytes as it reads, so the TPOT fraction of the memory floor is at most about 0.5"
