package fleetreport

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The outlier rule's metrics, per node and model, from the node's report.json. Each is judged
// only against nodes of the same GPU kind, and each is shape-free or one-sided so that a
// smaller node shape is not an outlier for being smaller (aicr#1254, #1256):
//   - MetricWakeFraction: the level-1 wake's PCIe floor (weight bytes / the node's own link
//     rate) over the measured wake (physical_limits.l1_wake_fraction_of_floor); a node
//     with a narrower link has a lower floor and keeps its fraction. Lower is worse.
//   - MetricTPSFraction: baseline output tok/s (lowest concurrency c, median round) over
//     c / the node's own TPOT floor (weight bytes / its HBM bandwidth): the share of the
//     decode rate its memory bandwidth allows at c, a fraction. Lower is worse. MetricTPS, the raw rate, stands in for a node
//     whose report has no HBM figure (compared only with the kind's nodes in the same case).
//   - MetricResidual: the level-1 residual GiB (median of the cycles). A property of the
//     software and the model, not of the node's size; only higher is worse, so a node that
//     keeps less is never flagged.
//   - MetricLinkFraction: the node's link as its link probe measured it, host→device, over
//     the rate NVML's maximum link promises (report.json link_probe, the slowest GPU's), a
//     fraction of the node's own link, judged under model LinkModel. NVML reports the maximum
//     link even where it trained down, so without a probe such a link shows only through slow
//     wakes, and only against peers; with one it is named on any node by the floor
//     MinLinkFractionOfNominal, peers or not. Lower is worse.
const (
	MetricLinkFraction = "link_h2d_fraction_of_nominal"
	// LinkModel is the model label a node's link figures are judged under: the link is the
	// node's, not a model's.
	LinkModel          = "(link)"
	MetricWakeFraction = "l1_wake_fraction_of_floor"
	MetricTPSFraction  = "output_tps_fraction_of_hbm_limit"
	MetricTPS          = "output_tps"
	MetricResidual     = "residual_gib"
)

// Options are the outlier rule's thresholds. A zero field takes its default; a negative
// floor or excess turns that test off.
//
// The rule, for one node's figure x of one model and metric, against m, the median of the same
// figure over the other PASS nodes of its kind (the node itself left out, so a bad node does
// not pull its own reference):
//  1. relative: x is worse than m (in the metric's bad direction) by at least
//     RelativeDeviation × m (and, for residual_gib, by at least MinResidualExcessGiB);
//  2. robust spread, only with at least MADMinOthers other nodes: x is also worse than m by at
//     least MADs × 1.4826 × MAD of the others (MAD 0, all others equal: rule 1 alone decides);
//  3. absolute floors, only for a node with fewer than FloorMaxOthers+1 (2) other PASS nodes
//     of its kind for the figure: a physical-limit fraction below MinWakeFractionOfPCIe or
//     MinTPSFractionOfHBM. The fractions are of the node's own limits, so a floor on them does
//     not fail a smaller shape; but a small, launch-bound model can sit under 0.15 on every
//     healthy node, so where the kind has a reference (2 or more others) rules 1 and 2 judge.
//
// What it can see: with one node of a kind, only rule 3 (a node far from its own physical
// limits; residual and raw tok/s cannot be judged). With two, each node against the other: the
// worse one is named if it is RelativeDeviation worse; both degraded alike are seen only by the
// floors. With three, each against the median of the other two: one bad node of three is
// named, two alike may be partly. With four or more (three others), median and MAD: any
// minority of bad nodes is named, and a noisy kind needs a larger deviation than a tight one.
// From three nodes on, a whole kind uniformly under the floors is not flagged.
type Options struct {
	RelativeDeviation     float64 `json:"relative_deviation"`        // default 0.25
	MADs                  float64 `json:"mads"`                      // default 3.5 (Iglewicz and Hoaglin's modified z-score)
	MADMinOthers          int     `json:"mad_min_others"`            // default 3
	MinResidualExcessGiB  float64 `json:"min_residual_excess_gib"`   // default 0.5
	MinWakeFractionOfPCIe float64 `json:"min_wake_fraction_of_pcie"` // default 0.15
	MinTPSFractionOfHBM   float64 `json:"min_tps_fraction_of_hbm"`   // default 0.15
	// MinLinkFractionOfNominal is the floor on MetricLinkFraction, applied on every node
	// whatever its kind's size: default 0.25.
	MinLinkFractionOfNominal float64 `json:"min_link_fraction_of_nominal"`
}

// Defaults. A healthy node reaches well above the floors: a link trained down from gen4 x16 to
// gen3 x8 (a quarter of the rate) takes a node at 0.6 of its limit to 0.15.
const (
	DefaultRelativeDeviation     = 0.25
	DefaultMADs                  = 3.5
	DefaultMADMinOthers          = 3
	DefaultMinResidualExcessGiB  = 0.5
	DefaultMinWakeFractionOfPCIe = 0.15
	DefaultMinTPSFractionOfHBM   = 0.15
	// DefaultMinLinkFractionOfNominal: a healthy PCIe link copies pinned memory at about 0.8
	// of its nominal rate (Gen4 x16: 25 of 31.5 GB/s), vllmsim's l20-derived profiles at 0.53
	// (the L20 reference's wakes), the tiny one at 0.79; a link trained to a quarter of its rate or less (Gen5 x16 to Gen4
	// x8, or to Gen3 x8: an eighth) falls below 0.25 on either. Smaller losses are left to
	// the relative rule against the kind's other nodes.
	DefaultMinLinkFractionOfNominal = 0.25
	// FloorMaxOthers: the floors (rule 3) apply to a node with at most this many other PASS
	// nodes of its kind for the figure.
	FloorMaxOthers = 1
)

func (o Options) withDefaults() Options {
	def := func(x *float64, d float64) {
		if *x == 0 {
			*x = d
		}
	}
	def(&o.RelativeDeviation, DefaultRelativeDeviation)
	def(&o.MADs, DefaultMADs)
	def(&o.MinResidualExcessGiB, DefaultMinResidualExcessGiB)
	def(&o.MinWakeFractionOfPCIe, DefaultMinWakeFractionOfPCIe)
	def(&o.MinTPSFractionOfHBM, DefaultMinTPSFractionOfHBM)
	def(&o.MinLinkFractionOfNominal, DefaultMinLinkFractionOfNominal)
	if o.MADMinOthers == 0 {
		o.MADMinOthers = DefaultMADMinOthers
	}
	return o
}

// higherIsBetter says each metric's good direction.
var higherIsBetter = map[string]bool{MetricLinkFraction: true, MetricWakeFraction: true, MetricTPSFraction: true, MetricTPS: true, MetricResidual: false}

func (o Options) floor(metric string) float64 {
	switch metric {
	case MetricWakeFraction:
		return o.MinWakeFractionOfPCIe
	case MetricTPSFraction:
		return o.MinTPSFractionOfHBM
	case MetricLinkFraction:
		return o.MinLinkFractionOfNominal
	}
	return 0
}

func (o Options) minExcess(metric string) float64 {
	if metric == MetricResidual {
		return max(o.MinResidualExcessGiB, 0)
	}
	return 0
}

// outliers applies the rule to the PASS nodes of one kind.
func outliers(nodes []Node, o Options) []Outlier {
	// basis splits the wake fraction by the rate its floor was taken at (a node whose probe
	// did not run is judged against its nominal link, ~0.5 of a measured one's fraction): only
	// nodes of one basis are compared.
	type key struct{ model, metric, basis string }
	type point struct {
		node int
		x    float64
	}
	series := map[key][]point{}
	for i, n := range nodes {
		if !n.pooled {
			continue
		}
		for label, fig := range n.Models {
			for metric, x := range fig.metrics {
				k := key{label, metric, ""}
				if metric == MetricWakeFraction {
					k.basis = fig.PCIeBasis
				}
				series[k] = append(series[k], point{i, x})
			}
		}
		if n.Link != nil && n.Link.FractionOfNominal > 0 {
			k := key{LinkModel, MetricLinkFraction, ""}
			series[k] = append(series[k], point{i, n.Link.FractionOfNominal})
		}
	}
	keys := make([]key, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.metric, b.metric), cmp.Compare(a.basis, b.basis))
	})

	var out []Outlier
	var sorted, scratch []float64
	for _, k := range keys {
		pts := series[k]
		slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		sorted = sorted[:0]
		for _, p := range pts {
			sorted = append(sorted, p.x)
		}
		up := higherIsBetter[k.metric]
		for r, p := range pts {
			others := len(pts) - 1
			o1 := Outlier{Node: nodes[p.node].Node, GPU: nodes[p.node].GPU, Model: k.model, Metric: k.metric, Value: p.x, Others: others}
			if others > 0 {
				m := medianWithout(sorted, r)
				o1.KindMedian = m
				worse := p.x - m
				if up {
					worse = m - p.x
				}
				if m > 0 && worse >= o.RelativeDeviation*m && worse >= o.minExcess(k.metric) {
					dir := "above"
					if up {
						dir = "below"
					}
					same := ""
					if k.basis != "" {
						same = fmt.Sprintf(" whose wake floors are at the %s link too", k.basis)
					}
					rule := fmt.Sprintf("%.0f%% %s the median of the kind's %d other nodes%s (relative rule: at least %.0f%%", 100*worse/m, dir, others, same, 100*o.RelativeDeviation)
					if mex := o.minExcess(k.metric); mex > 0 {
						rule += fmt.Sprintf(" and %.2g GiB", mex)
					}
					flag := true
					if others >= o.MADMinOthers {
						scratch = scratch[:0]
						for j, x := range sorted {
							if j != r {
								scratch = append(scratch, math.Abs(x-m))
							}
						}
						slices.Sort(scratch)
						if mad := 1.4826 * medianWithout(scratch, -1); mad > 0 {
							z := worse / mad
							flag = z >= o.MADs
							rule += fmt.Sprintf("; %.1f scaled MADs of the others, at least %.1f", z, o.MADs)
						} else {
							rule += "; the others' MAD is 0"
						}
					} else {
						rule += fmt.Sprintf("; MAD not used with fewer than %d other nodes", o.MADMinOthers)
					}
					if flag {
						o1.Rule = rule + ")"
						out = append(out, o1)
						continue
					}
				}
			}
			if fl := o.floor(k.metric); fl > 0 && p.x < fl && k.metric == MetricLinkFraction {
				o1.Rule = fmt.Sprintf("link measured below %.2f of the rate NVML's maximum link promises (the floor on every node: a link trained down)", fl)
				out = append(out, o1)
			} else if fl > 0 && p.x < fl && others <= FloorMaxOthers {
				o1.Rule = fmt.Sprintf("below the absolute floor %.2f of a fraction of the node's own physical limit (the kind has %d other PASS nodes)", fl, others)
				out = append(out, o1)
			}
		}
	}
	return out
}

// medianWithout is the median of sorted with the element at index skip left out (skip < 0:
// none): the mean of the two middle values when their count is even.
func medianWithout(sorted []float64, skip int) float64 {
	n := len(sorted)
	at := func(k int) float64 {
		if skip >= 0 && k >= skip {
			return sorted[k+1]
		}
		return sorted[k]
	}
	if skip >= 0 {
		n--
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}
