package perf_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/load"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
)

// stampCollector is a load.Completer that keeps, for every token chunk,
// the time the harness records for it minus the time vllmsim wrote it.
type stampCollector struct {
	c      *vllm.Client
	mu     sync.Mutex
	delays []float64 // µs
	err    error
}

func (s *stampCollector) Complete(ctx context.Context, r vllm.CompletionRequest) (*vllm.Stream, error) {
	st, err := s.c.Complete(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		return st, err
	}
	if len(st.Stamps) != len(st.Tokens) {
		s.err = fmt.Errorf("%d stamps for %d tokens: is VLLMSIM_STAMP=1 set?", len(st.Stamps), len(st.Tokens))
	}
	for i, at := range st.Stamps {
		s.delays = append(s.delays, float64(st.Tokens[i].UnixNano()-at.UnixNano())/1e3)
	}
	return st, nil
}

// BenchmarkStreamOverhead measures what the measurement adds to TTFT and
// TPOT: for every token chunk, vllmsim's send stamp (taken just before the
// write) against the time the harness records for the token (its arrival),
// through the harness's own load generator. The server runs the tiny profile at time
// scale 1 (a 1 ms decode step at c=1, 26 ms at c=256, like a GPU), in its
// own process on loopback. One op is one round of c requests of 32 tokens.
func BenchmarkStreamOverhead(b *testing.B) {
	for _, c := range []int{1, 256} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			s := startSim(b, "1", true)
			col := &stampCollector{c: s.client}
			plan := load.Plan{Concurrency: c, Rounds: 1, RequestsPerRound: c, Timeout: time.Minute,
				Request: vllm.CompletionRequest{Model: s.model, Prompt: config.DefaultPrompt, MaxTokens: 32, IgnoreEOS: true}}
			load.Run(b.Context(), col, plan) // connections up, engine warm
			col.delays = nil
			for b.Loop() {
				load.Run(b.Context(), col, plan)
			}
			if col.err != nil {
				b.Fatal(col.err)
			}
			b.ReportMetric(percentile(col.delays, 50), "p50-µs")
			b.ReportMetric(percentile(col.delays, 99), "p99-µs")
			b.ReportMetric(percentile(col.delays, 100), "max-µs")
			b.ReportMetric(float64(len(col.delays)), "chunks")
		})
	}
}

// BenchmarkStreamCapacity measures how many streamed tokens the load
// generator consumes on one core: GOMAXPROCS=1, vllmsim with no modelled
// delay in its own process (pinned to another CPU where there is one),
// 16 streams of 256 tokens at a time. tok/cpu-s is per CPU-second this
// process used, allocs/tok and B/tok the heap allocations per token.
func BenchmarkStreamCapacity(b *testing.B) {
	s := startSim(b, "0", false)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	plan := load.Plan{Concurrency: 16, Rounds: 1, RequestsPerRound: 64, Timeout: time.Minute,
		Request: vllm.CompletionRequest{Model: s.model, Prompt: config.DefaultPrompt, MaxTokens: 256, IgnoreEOS: true}}
	runAll(b, s.client, plan)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, tokens := cpuTime(), 0
	for b.Loop() {
		for _, q := range runAll(b, s.client, plan).Requests {
			tokens += q.OutputTokens
		}
	}
	cpu := cpuTime() - cpu0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	b.ReportMetric(float64(tokens)/cpu.Seconds(), "tok/cpu-s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(tokens), "allocs/tok")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(tokens), "B/tok")
}

// runAll runs the plan and fails the benchmark unless every request succeeded.
func runAll(b *testing.B, c load.Completer, p load.Plan) load.Result {
	res := load.Run(b.Context(), c, p)
	for _, q := range res.Requests {
		if q.Err != nil {
			b.Fatalf("%d of %d requests failed, first: %v", p.Planned()-res.Success(), p.Planned(), q.Err)
		}
	}
	return res
}

// BenchmarkRequestRate is the harness's generator sending non-streamed
// completions (16 tokens) at concurrency 32, GOMAXPROCS=1, to a vllmsim
// with no modelled delay: the figure scripts/peers.sh sets against wrk and
// vegeta on the same server and cores. With WAKEBENCH_PERF_URL set it
// targets that server (the script's) instead of starting one.
func BenchmarkRequestRate(b *testing.B) {
	b.Run("gen=wakebench", func(b *testing.B) {
		var c *vllm.Client
		if u := os.Getenv("WAKEBENCH_PERF_URL"); u != "" {
			c = vllm.New(u)
			b.Cleanup(c.CloseIdle)
		} else {
			c = startSim(b, "0", false).client
		}
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		plan := load.Plan{Concurrency: 32, Rounds: 1, RequestsPerRound: 1024, Timeout: time.Minute,
			Request: vllm.CompletionRequest{Model: "tiny-a", Prompt: config.DefaultPrompt, MaxTokens: 16, IgnoreEOS: true, NoStream: true}}
		runAll(b, c, plan)
		n := 0
		for b.Loop() {
			n += runAll(b, c, plan).Success()
		}
		b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "req/s")
	})
}

// BenchmarkSampler is the GPU memory sampler as a run uses it: the
// simulated GPU with two server processes, every sample written as CSV
// rows. An op is one sample interval. The process is first left idle for
// as long as the sampler will run, and that CPU time (the Go runtime's own
// wake-ups) is subtracted: cpu-µs/sample and core-% are what sampling adds.
// jitter is |interval between samples − nominal|. src=noop reads nothing:
// what waking a Go process at that rate costs on this machine.
func BenchmarkSampler(b *testing.B) {
	for _, hz := range []int{20, 50, 200} { // 20: the default sample_hz
		b.Run(fmt.Sprintf("src=sim/hz=%d", hz), func(b *testing.B) {
			benchSampler(b, simSource(b), hz)
		})
	}
	b.Run("src=noop/hz=50", func(b *testing.B) { benchSampler(b, noopSource{}, 50) })
}

// noopSource is a device that costs nothing to read.
type noopSource struct{}

func (noopSource) Describe() (string, error) { return "no-op", nil }
func (noopSource) Read(context.Context) (gpu.Reading, error) {
	return gpu.Reading{Used: 1 << 30, Total: 16 << 30, Procs: map[int]uint64{1: 1 << 30}}, nil
}

func simSource(b *testing.B) gpu.Source {
	dir := b.TempDir()
	if err := simgpu.Create(dir, simgpu.Device{Name: "Tiny Sim GPU", TotalBytes: 16 << 30}); err != nil {
		b.Fatal(err)
	}
	for i, pid := range []int{os.Getpid(), os.Getppid()} { // live pids: the simulated GPU drops dead ones
		if err := simgpu.Publish(dir, simgpu.Process{PID: pid, Model: fmt.Sprint("m", i), UsedBytes: uint64(i+1) << 30}); err != nil {
			b.Fatal(err)
		}
	}
	return backend.NewSimSource(dir)
}

func benchSampler(b *testing.B, src gpu.Source, hz int) {
	interval := time.Second / time.Duration(hz)
	window := time.Duration(b.N) * interval
	cpu0 := cpuTime()
	time.Sleep(window)
	idle := cpuTime() - cpu0

	sw, err := report.NewSamplesWriter(bufio.NewWriter(io.Discard), true)
	if err != nil {
		b.Fatal(err)
	}
	smp := gpu.NewSampler(src, interval)
	smp.OnSample(func(s gpu.Sample) { sw.GPU(s, func(int) string { return "A" }) })
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0 = cpuTime()
	wg.Go(func() { smp.Run(ctx) })
	time.Sleep(window)
	cancel()
	wg.Wait()
	busy := cpuTime() - cpu0
	b.StopTimer()
	if n, err := smp.Errors(); n > 0 {
		b.Fatalf("%d read errors, last: %v", n, err)
	}
	samples := smp.Samples()
	var jitter []float64
	for i := 1; i < len(samples); i++ {
		jitter = append(jitter, math.Abs(float64(samples[i].Time.Sub(samples[i-1].Time)-interval))/1e3)
	}
	added := max(busy-idle, 0)
	b.ReportMetric(100*added.Seconds()/window.Seconds(), "core-%")
	b.ReportMetric(float64(added.Microseconds())/float64(len(samples)), "cpu-µs/sample")
	b.ReportMetric(100*idle.Seconds()/window.Seconds(), "idle-core-%")
	b.ReportMetric(percentile(jitter, 99), "jitter-p99-µs")
}

// BenchmarkReadyResolution measures how late the harness notices that a
// server is ready: a server starts listening at a random moment (0–50 ms
// in) and answers /health; late is the harness's ready time (WaitReady at
// the default poll_ms) minus that moment.
func BenchmarkReadyResolution(b *testing.B) {
	poll := time.Duration(config.SimDefault().Timeouts.PollMS * float64(time.Millisecond))
	var late []float64
	for b.Loop() {
		late = append(late, readyOnce(b, poll))
	}
	b.ReportMetric(percentile(late, 50), "late-p50-ms")
	b.ReportMetric(percentile(late, 99), "late-p99-ms")
	b.ReportMetric(float64(poll.Milliseconds()), "poll-ms")
}

func readyOnce(b *testing.B, poll time.Duration) float64 {
	port := freePort(b)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	listening := make(chan time.Time, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	go func() {
		time.Sleep(time.Duration(rand.Int64N(int64(50 * time.Millisecond))))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			close(listening)
			return
		}
		listening <- time.Now()
		_ = srv.Serve(ln)
	}()
	defer srv.Close()
	c := vllm.New("http://" + addr)
	defer c.CloseIdle()
	readyAt, err := c.WaitReady(b.Context(), poll)
	if err != nil {
		b.Fatal(err)
	}
	at, ok := <-listening
	if !ok {
		b.Fatal("could not listen on", addr)
	}
	return float64(readyAt.Sub(at).Microseconds()) / 1e3
}

// BenchmarkWakeResolution measures the floor the harness adds to every
// wake figure: a level-1 wake of a vllmsim with no modelled delay, timed
// as the harness times it (the /wake_up round trip). All of it is
// harness, HTTP and simulator overhead.
func BenchmarkWakeResolution(b *testing.B) {
	s := startSim(b, "0", false)
	ctx := b.Context()
	var late []float64
	for b.Loop() {
		b.StopTimer()
		if err := s.client.Sleep(ctx, 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := s.client.WakeUp(ctx); err != nil {
			b.Fatal(err)
		}
		late = append(late, float64(time.Since(t0).Microseconds())/1e3)
	}
	b.ReportMetric(percentile(late, 50), "late-p50-ms")
	b.ReportMetric(percentile(late, 99), "late-p99-ms")
}

// BenchmarkPhysicalLimits runs a short protocol (start, baseline at c=1,
// three level-1 cycles) on vllmsim's demo profile (the L20's links,
// Qwen3-4B) and reports the model's physical-limit figures from its
// report: level-1 wake and TPOT at c=1 as fractions of the PCIe and memory
// bandwidth limits. Simulated: they check the pipeline from NVML-style
// facts and the server's log to the report; on a GPU runner every report
// carries the real ones.
func BenchmarkPhysicalLimits(b *testing.B) {
	for b.Loop() {
		cfg := config.SimDefault()
		cfg.OutDir = b.TempDir()
		// make bench's sim settings (testdata/demo.json): at host_scale 1
		// each level-1 sleep of the 4B model would really page in 7.5 GiB.
		cfg.Sim.Profile, cfg.Sim.TimeScale, cfg.Sim.HostScale = "demo", 0.1, 0.125
		cfg.Models = []config.Model{{Label: "A", Name: "Qwen3-4B", GPUMemoryUtilization: 0.5}}
		p := &cfg.Protocol
		p.Concurrency, p.Rounds, p.RequestsPerRound, p.MaxTokens, p.SleepL1Cycles = []int{1}, 1, 4, 32, 3
		if err := cfg.Validate(); err != nil {
			b.Fatal(err)
		}
		h, err := harness.Open(b.Context(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		_, err = protocol.Baseline{Env: h.Env()}.Run(b.Context(), "A", b.Logf)
		if err == nil {
			_, err = protocol.Sleep{Env: h.Env(), Level: 1}.Run(b.Context(), "A", b.Logf)
		}
		rep, cerr := h.Close(nil)
		if err != nil || cerr != nil {
			b.Fatal(err, cerr)
		}
		lim := rep.Models["A"].PhysicalLimits
		if lim == nil || lim.Note != "" {
			b.Fatalf("physical limits: %+v", lim)
		}
		b.ReportMetric(lim.L1WakeFractionOfFloor, "l1-wake/link-floor")
		b.ReportMetric(lim.TPOTFractionOfHBM, "tpot-c1/hbm-limit")
	}
}

// clientSender sends every arrival straight to one server.
type clientSender struct{ c *vllm.Client }

func (s clientSender) Send(ctx context.Context, a load.Arrival) (load.Delivery, error) {
	now := time.Now()
	st, err := s.c.Complete(ctx, a.Request)
	return load.Delivery{Stream: st, Dispatched: now}, err
}

// nopSender answers at once with one token: the generator alone.
type nopSender struct{}

func (nopSender) Send(ctx context.Context, a load.Arrival) (load.Delivery, error) {
	now := time.Now()
	return load.Delivery{Stream: &vllm.Stream{Sent: now, Tokens: []time.Time{now}, OutputTokens: 1}, Dispatched: now}, nil
}

// BenchmarkOpenLoopSchedule is the open-loop generator on one core
// (GOMAXPROCS=1) sending constant and Poisson arrivals at 2000 req/s.
// sender=none: to a sender that answers at once (the generator's own
// precision, its goroutine per request included); sender=http:
// non-streamed 8-token completions to a vllmsim with no modelled delay in
// its own process, the HTTP client's work on the same core.
// schedule-p99-µs: the generator handing a request on (Issued) against
// its planned time; send-p99-µs: the request written (Stream.Sent)
// against it. One op is 2000 requests (one second).
func BenchmarkOpenLoopSchedule(b *testing.B) {
	senders := map[string]func(b *testing.B) load.Sender{
		"none": func(*testing.B) load.Sender { return nopSender{} },
		"http": func(b *testing.B) load.Sender { return clientSender{startSim(b, "0", false).client} },
	}
	for _, name := range []string{"none", "http"} {
		for _, process := range []string{load.Constant, load.Poisson} {
			b.Run("sender="+name+"/arrivals="+process+"/rate=2000", func(b *testing.B) {
				sender := senders[name](b)
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
				offsets, err := (load.Arrivals{Process: process, Rate: 2000, Seed: 1}).Offsets(2000)
				if err != nil {
					b.Fatal(err)
				}
				arrivals := make([]load.Arrival, len(offsets))
				for i, at := range offsets {
					arrivals[i] = load.Arrival{At: at, Model: "A", Request: vllm.CompletionRequest{Model: "tiny-a", Prompt: "hi", MaxTokens: 8, IgnoreEOS: true, NoStream: true}}
				}
				load.RunOpen(b.Context(), sender, arrivals[:200], time.Minute) // warm the connections
				var issue, sent []float64
				failed := 0
				for b.Loop() {
					for _, o := range load.RunOpen(b.Context(), sender, arrivals, time.Minute) {
						if o.Err != nil {
							failed++
							continue
						}
						issue = append(issue, float64(o.Issued.Sub(o.Planned))/1e3)
						sent = append(sent, float64(o.Sent.Sub(o.Planned))/1e3)
					}
				}
				if failed > 0 {
					b.Fatalf("%d requests failed", failed)
				}
				b.ReportMetric(percentile(issue, 99), "schedule-p99-µs")
				b.ReportMetric(percentile(issue, 50), "schedule-p50-µs")
				if name == "http" {
					b.ReportMetric(percentile(sent, 99), "send-p99-µs")
				}
			})
		}
	}
}
