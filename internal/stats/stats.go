// Package stats summarises samples the way wakebench reports them:
// n, median, min, max and the 95th percentile by nearest rank.
package stats

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
)

// PercentileMethod names the percentile rule used by Summarize, for the report.
const PercentileMethod = "nearest-rank; small sample"

// ErrEmpty is returned when there is nothing to summarise.
var ErrEmpty = errors.New("stats: no samples")

// Summary is the five-number description of a sample set used throughout the report.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	P95    float64 `json:"p95"`
}

// MarshalJSON writes a Summary of no samples (n = 0: nothing measured)
// with null figures, never 0: a reader and the gate must tell "0 s"
// from "none" (issue 50). A null reads back as the zero value.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary // without this method
	if s.N > 0 {
		return json.Marshal(plain(s))
	}
	return json.Marshal(nullFigures{})
}

// nullFigures is a Summary of no samples as JSON.
type nullFigures struct {
	N      int      `json:"n"`
	Median *float64 `json:"median"`
	Min    *float64 `json:"min"`
	Max    *float64 `json:"max"`
	P95    *float64 `json:"p95"`
}

// Summarize computes the Summary of xs. The median is the mean of the two middle
// values when n is even; p95 is the value at rank ceil(0.95·n) of the sorted
// samples (nearest rank). Empty input and NaN values are errors, never NaN output.
func Summarize(xs []float64) (Summary, error) {
	if len(xs) == 0 {
		return Summary{}, ErrEmpty
	}
	s := slices.Clone(xs)
	for _, x := range s {
		if math.IsNaN(x) {
			return Summary{}, errors.New("stats: NaN sample")
		}
	}
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{N: n, Median: med, Min: s[0], Max: s[n-1], P95: NearestRank(s, 95)}, nil
}

// NearestRank returns the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank rule: the value at rank ceil(p/100·n), ranks counted from 1.
func NearestRank(sorted []float64, p float64) float64 {
	return sorted[Rank(len(sorted), p)-1]
}

// Rank is the nearest-rank rule's rank of the p-th percentile (0 < p ≤
// 100) of n ≥ 1 sorted samples: ceil(p/100·n), counted from 1, within
// [1, n]. For whoever changes the samples at a percentile's place (the
// regression gate's injected tails), not only reads its value.
func Rank(n int, p float64) int {
	rank := int(math.Ceil(p / 100 * float64(n)))
	// Guard against floating-point error pushing e.g. 0.95*20 to 19.000000000000004.
	if r := p / 100 * float64(n); math.Abs(r-math.Round(r)) < 1e-9 {
		rank = int(math.Round(r))
	}
	return max(1, min(rank, n))
}

// Distribution is a latency distribution as serving benchmarks give it:
// the Summary's figures plus p50, p90 and p99 by nearest rank, and the mean.
type Distribution struct {
	Summary
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

// MarshalJSON writes a Distribution as Summary does: null figures, not 0,
// for none (issue 50). It is needed as well as Summary's: the embedded
// method would otherwise write the Summary's fields alone.
func (d Distribution) MarshalJSON() ([]byte, error) {
	if d.N > 0 {
		type summary Summary // its fields, without its MarshalJSON
		return json.Marshal(struct {
			summary
			P50  float64 `json:"p50"`
			P90  float64 `json:"p90"`
			P99  float64 `json:"p99"`
			Mean float64 `json:"mean"`
		}{summary(d.Summary), d.P50, d.P90, d.P99, d.Mean})
	}
	return json.Marshal(struct {
		nullFigures
		P50  *float64 `json:"p50"`
		P90  *float64 `json:"p90"`
		P99  *float64 `json:"p99"`
		Mean *float64 `json:"mean"`
	}{})
}

// Distribute computes the Distribution of xs (the zero one, n = 0, for none).
func Distribute(xs []float64) Distribution {
	s, err := Summarize(xs)
	if err != nil {
		return Distribution{}
	}
	sorted := slices.Sorted(slices.Values(xs))
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return Distribution{Summary: s, P50: NearestRank(sorted, 50), P90: NearestRank(sorted, 90), P99: NearestRank(sorted, 99), Mean: sum / float64(len(xs))}
}
