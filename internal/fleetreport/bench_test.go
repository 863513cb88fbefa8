package fleetreport

import (
	"fmt"
	"runtime/metrics"
	"sync"
	"testing"
	"time"
)

// BenchmarkBuild is the coordinator's work for a fleet of N nodes: Build and Write of N
// simulated node results (each a copy of out/'s report.json and bench.txt from a vllmsim run,
// its figures varied), three GPU kinds, one node degraded. MiB-peak is the most heap the
// iteration held above what was live before it (sampled every millisecond); MiB-input is the
// node results themselves, which the caller holds.
func BenchmarkBuild(b *testing.B) {
	base, bench := readTestdata(b)
	kinds := []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L20"}
	for _, n := range []int{10, 100, 1000} {
		in := make([]NodeResult, n)
		input := 0
		for i := range in {
			s := shape{fmt.Sprintf("node-%04d", i), kinds[i%len(kinds)], 0.6 + 0.01*float64(i%7), 0.5, 0.5, 1, 0.8}
			if i == n/2 {
				s.wake = 0.3
			}
			in[i] = synth(b, base, bench, s)
			input += len(in[i].Report) + len(in[i].Bench)
		}
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			dir := b.TempDir()
			var peak uint64
			for b.Loop() {
				p := heapPeak(func() {
					f, err := Build(in, Options{})
					if err != nil {
						b.Fatal(err)
					}
					if len(f.Flagged()) != 1 {
						b.Fatalf("flagged %v, want one node", f.Flagged())
					}
					if err := Write(dir, f); err != nil {
						b.Fatal(err)
					}
				})
				peak = max(peak, p)
			}
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
			b.ReportMetric(float64(input)/(1<<20), "MiB-input")
		})
	}
}

// heapPeak runs fn and returns the most heap object bytes seen during it above those before.
func heapPeak(fn func()) uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(s); return s[0].Value.Uint64() }
	before := read()
	var mu sync.Mutex // guards peak
	peak := before
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return max(peak, read()) - before
}
