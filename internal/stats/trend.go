package stats

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Trend is the least-squares line through a series taken at steps 0, 1, …:
// its slope per step with a two-sided 95 % confidence interval (Student's
// t on n − 2 degrees of freedom), and its value at the last step.
type Trend struct {
	N      int     `json:"n"`
	Slope  float64 `json:"slope"`
	CILow  float64 `json:"ci95_low"`
	CIHigh float64 `json:"ci95_high"`
	Last   float64 `json:"fitted_last"` // the line at the last step
}

// ErrTooShort: a trend needs three points (one degree of freedom left for
// the interval).
var ErrTooShort = errors.New("a trend needs at least 3 values")

// FitTrend fits ys against their index.
func FitTrend(ys []float64) (Trend, error) {
	n := len(ys)
	if n < 3 {
		return Trend{N: n}, ErrTooShort
	}
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = float64(i)
	}
	alpha, beta := stat.LinearRegression(xs, ys, nil, false)
	var sse, sxx float64
	mx := stat.Mean(xs, nil)
	for i := range xs {
		r := ys[i] - (alpha + beta*xs[i])
		sse += r * r
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	se := math.Sqrt(sse / float64(n-2) / sxx)
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 2)}.Quantile(0.975)
	return Trend{N: n, Slope: beta, CILow: beta - t*se, CIHigh: beta + t*se, Last: alpha + beta*float64(n-1)}, nil
}
