package gate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// E-Divisive means (Matteson & James, "A Nonparametric Approach for
// Multiple Change Point Analysis of Multivariate Data", JASA 2014), as
// MongoDB's CI uses it on each metric's history of runs (Daly et al.,
// "Change Point Detection in Software Performance Testing", ICPE 2020) and
// Hunter does (Fleming et al., ICPE 2023). No Go library implements it, so
// this is a small one: the divergence statistic with exponent 1 (absolute
// differences), the best split of a segment by it, significance by a
// permutation test with a fixed seed (deterministic), and recursive
// bisection of the significant splits.

// EDivisiveMinSize is the fewest runs on each side of a change point: a
// single slow run in the middle of a history is a blip, not a new level.
const EDivisiveMinSize = 2

// EDivisivePermutations is the permutation test's size: the smallest
// p-value it can give is 1/(permutations+1).
const EDivisivePermutations = 199

// Split is one significant change in a series: From is the index of the
// first value of the new level.
type Split struct {
	From int
	Q, P float64
}

// EDivisive returns the significant change points of xs at level alpha,
// in index order. Permutations are drawn from a generator seeded with seed,
// so the same series gives the same answer.
//
// Its work is O(EDivisivePermutations · n²) per split found (each
// permutation is a bestSplit of the segment): callers bound n (Judge
// looks at most at HistoryMaxRuns runs). ctx is checked before every
// bestSplit, so a cancelled ctx stops it within one O(n²) pass, with
// ctx's cause.
func EDivisive(ctx context.Context, xs []float64, alpha float64, seed uint64) ([]Split, error) {
	var out []Split
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var bisect func(lo, hi int) error
	bisect = func(lo, hi int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("change points: %w", context.Cause(ctx))
		}
		seg := xs[lo:hi]
		tau, q := bestSplit(seg)
		if tau < 0 {
			return nil
		}
		perm := slices.Clone(seg)
		ge := 0
		for range EDivisivePermutations {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("change points: %w", context.Cause(ctx))
			}
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			if _, qp := bestSplit(perm); qp >= q {
				ge++
			}
		}
		p := float64(ge+1) / float64(EDivisivePermutations+1)
		if p > alpha {
			return nil
		}
		out = append(out, Split{From: lo + tau, Q: q, P: p})
		if err := bisect(lo, lo+tau); err != nil {
			return err
		}
		return bisect(lo+tau, hi)
	}
	if err := bisect(0, len(xs)); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Split) int { return a.From - b.From })
	return out, nil
}

// bestSplit returns the split τ of xs (left xs[:τ], right xs[τ:], each at
// least EDivisiveMinSize long) that maximizes
//
//	Q(τ) = m·k/(m+k) · ( 2/(m·k) Σ|xᵢ−yⱼ| − 1/C(m,2) Σ|xᵢ−xᵢ'| − 1/C(k,2) Σ|yⱼ−yⱼ'| )
//
// with m = τ and k = n−τ, and Q there; τ = −1 when xs is too short. It is
// O(n²): moving τ right moves one value from the right side to the left.
func bestSplit(xs []float64) (int, float64) {
	n := len(xs)
	if n < 2*EDivisiveMinSize {
		return -1, 0
	}
	total, left, right := 0.0, 0.0, 0.0
	for i := range n {
		for j := i + 1; j < n; j++ {
			total += math.Abs(xs[i] - xs[j])
		}
	}
	right = total
	best, bestQ := -1, math.Inf(-1)
	for tau := 1; tau < n; tau++ {
		// xs[tau-1] moves from right to left.
		v := xs[tau-1]
		for i := range tau - 1 {
			left += math.Abs(xs[i] - v)
		}
		for j := tau; j < n; j++ {
			right -= math.Abs(v - xs[j])
		}
		m, k := float64(tau), float64(n-tau)
		if tau < EDivisiveMinSize || n-tau < EDivisiveMinSize {
			continue
		}
		cross := total - left - right
		within := func(sum, c float64) float64 {
			if c < 2 {
				return 0
			}
			return sum / (c * (c - 1) / 2)
		}
		q := m * k / (m + k) * (2*cross/(m*k) - within(left, m) - within(right, k))
		if q > bestQ {
			best, bestQ = tau, q
		}
	}
	return best, bestQ
}
