package wakebench

import (
	"fmt"
	"testing"

	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/stats"
)

// The benchmarks measure one protocol step per iteration and report it
// under the names and units of bench.txt, so go test output is benchstat
// input too:
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 . | tee new.txt
//	go tool benchstat old.txt new.txt
//
// They are extra measurements: report.json holds the tests' protocol run.

func BenchmarkRestart(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		b.Run("model="+l+"/kind=warm", func(b *testing.B) {
			var ready, first []float64
			for b.Loop() {
				rs, err := h.WarmStart(ctx, l)
				if err != nil {
					b.Fatal(err)
				}
				ready, first = append(ready, rs.ReadyS), append(first, rs.FirstTokenS)
			}
			reportMean(b, ready, report.UnitReady)
			reportMean(b, first, report.UnitFirstToken)
		})
	}
}

func BenchmarkSleep(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, level := range []int{1, 2} {
			b.Run(fmt.Sprintf("model=%s/level=%d", l, level), func(b *testing.B) {
				var sleep, wake, first, resid []float64
				for b.Loop() {
					c, err := h.Cycle(ctx, l, level)
					if err != nil {
						b.Fatal(err)
					}
					sleep, wake, first = append(sleep, c.SleepS), append(wake, c.WakeAPIS), append(first, c.ToFirstTokenS)
					if c.ResidualGiB == c.ResidualGiB {
						resid = append(resid, c.ResidualGiB)
					}
				}
				reportMean(b, sleep, report.UnitSleep)
				reportMean(b, wake, report.UnitWake)
				reportMean(b, first, report.UnitFirstToken)
				reportMean(b, resid, report.UnitResidual)
			})
		}
	}
}

func BenchmarkServe(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	for _, l := range h.Labels() {
		for _, c := range h.Config().Protocol.Concurrency {
			b.Run(fmt.Sprintf("model=%s/stage=baseline/conc=%d", l, c), func(b *testing.B) {
				var tps, ttft, tpot []float64
				for b.Loop() {
					res, err := h.ServeRound(ctx, l, c)
					if err != nil {
						b.Fatal(err)
					}
					tps = append(tps, res.Rounds[0].TPS)
					for _, q := range res.Requests {
						ttft = append(ttft, q.TTFT.Seconds())
						if q.HasTPOT {
							tpot = append(tpot, q.TPOT.Seconds())
						}
					}
				}
				reportMean(b, tps, report.UnitTPS)
				reportMedian(b, ttft, report.UnitTTFT)
				reportMedian(b, tpot, report.UnitTPOT)
			})
		}
	}
}

func BenchmarkSwitch(b *testing.B) {
	h, ctx := suite.h, suite.ctx
	labels := h.Labels()
	if len(labels) < 2 {
		b.Skip("switching needs two models")
	}
	for i, from := range labels {
		to := labels[(i+1)%len(labels)]
		b.Run("dir="+record.DirectionKey(from, to), func(b *testing.B) {
			var sleep, wake, first []float64
			for b.Loop() {
				ho, err := h.Handoff(ctx, from, to)
				if err != nil {
					b.Fatal(err)
				}
				sleep, wake, first = append(sleep, ho.SleepS), append(wake, ho.WakeS), append(first, ho.ToFirstTokenS)
			}
			reportMean(b, sleep, report.UnitSleep)
			reportMean(b, wake, report.UnitWake)
			reportMean(b, first, report.UnitFirstToken)
		})
	}
}

// reportMean reports the mean per iteration (with -benchtime 1x: the
// sample itself) and drops the ns/op column, which times the harness.
func reportMean(b *testing.B, xs []float64, unit string) {
	if len(xs) == 0 {
		return
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	b.ReportMetric(sum/float64(len(xs)), unit)
	b.ReportMetric(0, "ns/op")
}

// reportMedian reports the median of per-request figures.
func reportMedian(b *testing.B, xs []float64, unit string) {
	if s, err := stats.Summarize(xs); err == nil {
		b.ReportMetric(s.Median, unit)
	}
	b.ReportMetric(0, "ns/op")
}
