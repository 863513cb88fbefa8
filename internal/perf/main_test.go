package perf_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/stats"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/vllm"
)

// simPath is the vllmsim binary (backend.BuildSim) the benchmarks run.
var simPath string

func TestMain(m *testing.M) {
	if addr := os.Getenv(envPinger); addr != "" {
		os.Exit(pinger(addr))
	}
	testmain.Narrow("") // its gpu-tag benchmark runs with -bench, as make perf PERF_TAGS=gpu asks
	var err error
	if simPath, err = backend.BuildSim(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil { // benchmarks too: every server, client and sampler they start is stopped
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sim is a vllmsim process serving tiny-a on loopback.
type sim struct {
	url    string
	client *vllm.Client
	model  string
}

// startSim starts vllmsim (tiny profile) at the time scale given ("0": no
// modelled delay) and waits until it is ready. With more than one CPU the
// server is pinned to CPU 0 (taskset), so that a client with GOMAXPROCS=1
// has a core of its own. The process is stopped when tb ends.
func startSim(tb testing.TB, scale string, stamp bool) *sim {
	tb.Helper()
	port := freePort(tb)
	dir := tb.TempDir()
	args := []string{"serve", "tiny-a", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--enable-sleep-mode",
		"--max-model-len", "4096", "--kv-cache-memory-bytes", "1073741824"}
	path, args := onCPU0(simPath, args...)
	env := backend.SimEnv("tiny", scale, dir, stamp)
	srv, err := server.Start(server.Spec{Label: "perf", Path: path, Args: args, Env: env, LogPath: filepath.Join(dir, "vllmsim.log")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Stop(5 * time.Second) })
	s := &sim{url: fmt.Sprintf("http://127.0.0.1:%d", port), model: "tiny-a"}
	s.client = vllm.New(s.url)
	tb.Cleanup(s.client.CloseIdle)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Alive(ctx, func(ctx context.Context) error { _, err := s.client.WaitReady(ctx, 5*time.Millisecond); return err }); err != nil {
		tb.Fatalf("vllmsim: %v", err)
	}
	return s
}

// onCPU0 is the command line that runs path with args on CPU 0 (taskset)
// where there is more than one CPU and taskset is installed, else as it is.
func onCPU0(path string, args ...string) (string, []string) {
	if runtime.NumCPU() > 1 {
		if ts, err := exec.LookPath("taskset"); err == nil {
			return ts, append([]string{"-c", "0", path}, args...)
		}
	}
	return path, args
}

func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of xs, 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return stats.NearestRank(slices.Sorted(slices.Values(xs)), p)
}
