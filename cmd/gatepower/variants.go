package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/variants"
)

// The variant runs' scenarios (scripts/gate-power.sh with VARIANTS=1),
// each a directory of variant runs (<OUT>/<scenario>/<i>/comparison.json):
// the second variant the same code as the reference, or with every wake
// 10 % slower (vllmsim's slow-wake=1.1); with LOAD=1 each under the CPU
// hog too (the "-load" directories).
const (
	scVariantsSame     = "variants-same"
	scVariantsSlowWake = "variants-slowwake1.1"
	loadSuffix         = "-load"
)

// Each scenario's config (scripts/gate-power.sh runs them from the
// module's root): -rejudge judges its saved runs again with it.
var variantConfigs = map[string]string{
	scVariantsSame:     filepath.Join("testdata", "variants-gate-power.json"),
	scVariantsSlowWake: filepath.Join("testdata", "variants-gate-power-slow-wake.json"),
}

// rejudged is each comparison judged again from its runs' bench.txt by
// the scenario's config as it is now (its protocol.variant_focus, its
// tolerance): what the verdict's current rule says of the saved runs.
func rejudged(scenario string, cs []variants.Comparison) ([]variants.Comparison, error) {
	path := variantConfigs[scenario]
	cfg, err := config.Load(func(k string) string {
		if k == config.EnvFile {
			return path
		}
		return ""
	})
	if err != nil {
		return nil, fmt.Errorf("-rejudge: %w", err)
	}
	out := make([]variants.Comparison, len(cs))
	for i, c := range cs {
		for _, r := range c.Runs {
			if len(c.Blocks) < 2 || r.Block < 1 || r.Block > len(c.Blocks) {
				return nil, fmt.Errorf("-rejudge: %s run of %s: its comparison.json has %d blocks and a run of block %d: not a variant run's comparison as written", scenario, c.Reference, len(c.Blocks), r.Block)
			}
		}
		// The run's own plan (a LOAD=1 run may have had more blocks than
		// the config says, WAKEBENCH_PROTOCOL_VARIANT_BLOCKS).
		cfg.Protocol.VariantBlocks, cfg.Protocol.VariantOrder, cfg.Protocol.VariantSeed = len(c.Blocks), c.Order, c.Seed
		out[i] = variants.Compare(cfg, c.Runs)
		// A block whose bench.txt is no longer where the run left it (OUT
		// moved) would drop out and flag less: refused, not undercounted.
		if len(out[i].Metrics) != len(c.Metrics) {
			return nil, fmt.Errorf("-rejudge: %s run of %s: %d figures judged again, %d saved (%s): its runs' bench.txt must be where they were written",
				scenario, c.Reference, len(out[i].Metrics), len(c.Metrics), strings.Join(out[i].Failures, "; "))
		}
	}
	return out, nil
}

// readComparisons reads dir/<i>/comparison.json of every run directory of
// dir; missing counts the directories without one.
func readComparisons(dir string) (cs []variants.Comparison, missing int, err error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "comparison.json"))
		if os.IsNotExist(err) {
			missing++
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		var c variants.Comparison
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name(), "comparison.json"), err)
		}
		cs = append(cs, c)
	}
	return cs, missing, nil
}

// slowWakePct is the slow-wake scenario's change (vllmsim's
// slow-wake=1.1), and maxBlocks the most blocks variantRow says a run
// would need for it.
const (
	slowWakePct = 10.0
	maxBlocks   = 200
)

// variantRow counts the variant runs the paired verdict flagged: any
// gated figure (in protocol.variant_focus, the configs' Sleep … sec/wake)
// worse or better than the reference (want < 0: a false-alarm goal of at
// most one in twenty), or a sleep cycle's wake figure (Sleep … sec/wake:
// the variant gate-power configs run levels 1 and 2) worse (want > 0:
// caught at least that often).
func variantRow(what string, cs []variants.Comparison, wakeOnly bool, goal string, want int) row {
	r := row{what: what, of: len(cs), goal: goal}
	var judged, metrics, blocks, detect, need []float64
	for _, c := range cs {
		hit, n := false, 0
		for _, m := range c.Metrics {
			if m.Verdict != variants.NotJudge {
				n++
				if sleepWake(m) {
					detect = append(detect, m.DetectPct)
					if b := variants.BlocksFor(m, slowWakePct, c.TolerancePct, c.Alpha, maxBlocks); b > 0 {
						need = append(need, float64(b))
					}
				}
			}
			switch {
			case !m.Focus: // shown, not gated: it flags nothing
			case wakeOnly:
				hit = hit || m.Verdict == variants.Worse && sleepWake(m)
			default:
				hit = hit || m.Verdict == variants.Worse || m.Verdict == variants.Better
			}
		}
		if hit {
			r.flagged++
		}
		judged, metrics, blocks = append(judged, float64(n)), append(metrics, float64(len(c.Metrics))), append(blocks, float64(len(c.Blocks)))
	}
	r.judged, r.metrics = medianInt(judged), medianInt(metrics)
	caught := "—"
	if len(detect) > 0 {
		caught = fmt.Sprintf("%d %%", medianInt(detect))
	}
	needed := "—"
	if len(need) > 0 {
		// The upper median: a capped count (maxBlocks+1) is never averaged
		// with a real one.
		slices.Sort(need)
		n := int(need[len(need)/2])
		needed = fmt.Sprint(n)
		if n > maxBlocks {
			needed = fmt.Sprintf("more than %d", maxBlocks)
		}
	}
	r.against = fmt.Sprintf("the reference variant of the same run (%d blocks; a wake figure's change caught 8 times in 10 when judged alone, before Benjamini-Hochberg: median %s; blocks for a %g %% change of one wake figure caught so, from the spread of its blocks in each run: median %s)", medianInt(blocks), caught, slowWakePct, needed)
	if want > 0 {
		r.met = r.flagged >= want
	} else {
		r.met = r.flagged <= -want
	}
	return r
}

// hasVariantRuns reports whether out holds a variant scenario's runs,
// quiet or under the hog.
func hasVariantRuns(out string) bool {
	for _, sc := range []string{scVariantsSame, scVariantsSlowWake} {
		for _, dir := range []string{sc, sc + loadSuffix} {
			if _, err := os.Stat(filepath.Join(out, dir)); err == nil {
				return true
			}
		}
	}
	return false
}

// variantRows are the variant runs' rows where they ran, quiet and under
// the hog: the same code flagged at most once in twenty, every wake 10 %
// slower caught nine times in ten.
//
// With rejudge, each saved run is judged again by its scenario's config
// as it is now (rejudged).
func variantRows(out string, m *measurement, rejudge bool) error {
	if rejudge {
		m.notes = append(m.notes, "the variant runs judged again (-rejudge) by testdata/variants-gate-power*.json as they are now")
	}
	for _, load := range []bool{false, true} {
		for _, sc := range []string{scVariantsSame, scVariantsSlowWake} {
			dir, how := sc, "quiet"
			if load {
				dir, how = sc+loadSuffix, "under the hog"
			}
			cs, missing, err := readComparisons(filepath.Join(out, dir))
			if err != nil {
				return err
			}
			if rejudge {
				if cs, err = rejudged(sc, cs); err != nil {
					return err
				}
			}
			if missing > 0 {
				m.notes = append(m.notes, fmt.Sprintf("%s: %d run(s) wrote no comparison.json (see their test.log)", dir, missing))
				m.broken = true
			}
			k := len(cs)
			switch {
			case k == 0:
			case sc == scVariantsSame:
				lim := (k + 19) / 20
				m.rows = append(m.rows, variantRow("variants, the same code ("+how+"): any gated figure worse or better", cs, false, fmt.Sprintf("≤ %d flagged", lim), -lim))
			default:
				want := (9*k + 9) / 10
				m.rows = append(m.rows, variantRow("variants, every wake 10 % slower ("+how+"): a wake figure worse", cs, true, fmt.Sprintf("≥ %d flagged", want), want))
			}
		}
	}
	return nil
}

// sleepWake says whether m is a sleep cycle's wake figure (Sleep … sec/wake),
// its name split as comparison.json, the file it was read from, holds it.
func sleepWake(m variants.Metric) bool {
	return record.ParseBenchName(m.Name).Base == "Sleep" && m.Unit == "sec/wake"
}
