// Package vllmsim is a simulated vLLM server: the `vllm serve` command line,
// vLLM's OpenAI-compatible and sleep-mode HTTP API with its status codes and
// bodies, and a time and memory model derived from a GPU and model profile
// (bandwidths, weight bytes, start-up costs), as a release of vLLM has them
// (or as open PRs propose them: VLLMSIM_ERA). It publishes the device
// memory it holds to a simulated GPU (package simgpu) that wakebench samples
// like NVML, a rank process on each GPU for a model across several; or, in
// real-device mode (VLLMSIM_DEVICE=cuda, realdev.go), allocates it on a real
// GPU through the CUDA driver and makes a sleep's and a wake's copies there.
// It imports nothing of the harness: it is the other side of the wire.
//
// Settings that real vLLM does not have come from the environment, so the
// command line stays exactly vLLM's:
//
//	VLLMSIM_PROFILE     built-in profile (tiny, demo, l20); default tiny
//	VLLMSIM_TIME_SCALE  factor on every modelled duration; default 1; 0 runs
//	                    with no modelled delay at all (harness overhead benchmarks)
//	VLLMSIM_STAMP       1 adds "vllmsim_sent_ns" (Unix ns, taken just before
//	                    the write) to every streamed chunk, so a client can
//	                    measure its own receive delay
//	VLLMSIM_GPU_DIR     simulated GPU directories, ':'-separated, one per GPU
//	                    (--tensor-parallel-size uses the first N); default
//	                    private ones
//	VLLMSIM_WORKER_RANK set by the server on its rank processes (rank.go)
//	VLLMSIM_CACHE_DIR   compile-cache markers (initial vs warm start)
//	VLLMSIM_FAULTS      failures to inject (see Faults)
//	VLLMSIM_DEVICE_IDS  how CUDA_VISIBLE_DEVICES is read: "any" (default,
//	                    vLLM 0.24 on: indices and GPU-… UUIDs) or "int"
//	                    (vLLM before 0.24: int() of each entry, so a UUID
//	                    ends the start with its ValueError)
//	VLLMSIM_ERA         which vLLM's sleep API to speak: a (≤ v0.11), b (PR
//	                    #34528 to v0.30: modes, level 0, empty bodies), c
//	                    (v0.31: the KV release, empty bodies), d (v0.32 and
//	                    v0.33: #52864's JSON answers and operation metrics;
//	                    the default) or proposed (d with what open PRs
//	                    propose); docs/vllm-api.md §1
//	VLLMSIM_HOST_SCALE  factor on the host memory the server really
//	                    allocates for level-1 sleeps (default 1: the
//	                    profile's weight bytes; 0: none)
//	VLLMSIM_DEVICE      sim (default: the simulated GPU) or cuda (real-device
//	                    mode: memory and copies on CUDA device 0 of what
//	                    CUDA_VISIBLE_DEVICES leaves, as vLLM's worker)
//
// and vLLM's own: VLLM_SERVER_DEV_MODE, VLLM_API_KEY, VLLM_USE_RUST_FRONTEND,
// VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY, VLLM_POISON_DISCARDED_PAGES.
package vllmsim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/simgpu"
)

// Environment variables read by Main.
const (
	EnvProfile   = "VLLMSIM_PROFILE"
	EnvTimeScale = "VLLMSIM_TIME_SCALE"
	EnvCacheDir  = "VLLMSIM_CACHE_DIR"
	EnvDevMode   = "VLLM_SERVER_DEV_MODE"
	EnvStamp     = "VLLMSIM_STAMP"
	EnvDeviceIDs = "VLLMSIM_DEVICE_IDS"
	EnvEra       = "VLLMSIM_ERA"
	// vLLM's own (docs/vllm-api.md §7.2, §10).
	EnvRustFrontend = "VLLM_USE_RUST_FRONTEND"
	// EnvPlainOpMetrics=1 (eras d and proposed) names the operation
	// metrics as unmerged branch code did (vllm@47e7f394: vllm:sleep_mode_…,
	// no calls counter), not as PR #52864 merged them (vllm:rl_…, with
	// one): the harness reads both.
	EnvPlainOpMetrics    = "VLLMSIM_PLAIN_OP_METRICS"
	EnvReleaseHostMemory = "VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY"
	EnvPoisonPages       = "VLLM_POISON_DISCARDED_PAGES"
)

// Settings are vllmsim's own settings, read from the environment.
type Settings struct {
	Profile   Profile
	TimeScale float64
	GPUDir    string
	CacheDir  string
	DevMode   bool
	Stamp     bool // VLLMSIM_STAMP: stamp each streamed chunk with its send time
	Faults    *Faults
	APIKey    string // VLLM_API_KEY, used when --api-key is not given (as vLLM does)
	Era       era    // VLLMSIM_ERA
	// RustFrontend (VLLM_USE_RUST_FRONTEND=1, era proposed): no vllm:engine_sleep_state.
	RustFrontend bool
	// PlainOpMetrics (VLLMSIM_PLAIN_OP_METRICS=1, eras d and proposed):
	// the branch variant's operation metric names.
	PlainOpMetrics bool
	// ReleaseHostMemory (VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1): a weights
	// wake after level 1 frees the pinned host backup and logs it.
	ReleaseHostMemory bool
	// HostScale (VLLMSIM_HOST_SCALE): host bytes really allocated =
	// modelled bytes × HostScale.
	HostScale float64
	// PoisonPages (VLLM_POISON_DISCARDED_PAGES=1): a level-2 wake without
	// reload_weights answers poisonText, not "!".
	PoisonPages bool
	// Device (VLLMSIM_DEVICE): "sim", the simulated GPU, or "cuda", real-device mode.
	Device string
	// openGPU opens real-device mode's GPU (openCUDA; tests give a fake).
	openGPU func() (gpuMemory, error)
}

// SettingsFromEnv reads Settings; errors name the variable to fix.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	var st Settings
	name := getenv(EnvProfile)
	if name == "" {
		name = "tiny"
	}
	p, err := LookupProfile(name)
	if err != nil {
		return st, fmt.Errorf("%s: %w", EnvProfile, err)
	}
	st.Profile = p
	st.TimeScale = 1
	if v := getenv(EnvTimeScale); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0) || f > 1000 {
			return st, fmt.Errorf("%s=%q: want a number ≥ 0 (e.g. 0.1 runs ten times faster, 0 without any modelled delay)", EnvTimeScale, v)
		}
		st.TimeScale = f
	}
	st.HostScale = 1
	if v := getenv(EnvHostScale); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0) || f > 64 {
			return st, fmt.Errorf("%s=%q: want a number ≥ 0 (the factor on the host memory really allocated: 1 the profile's bytes, 0.01 a hundredth, 0 none)", EnvHostScale, v)
		}
		st.HostScale = f
	}
	// vLLM parses this with bool(int(...)): "true" is a ValueError there, so here too.
	if v := getenv(EnvDevMode); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return st, fmt.Errorf("ValueError: invalid literal for int() with base 10: %q (set %s=1)", v, EnvDevMode)
		}
		st.DevMode = n != 0
	}
	switch v := getenv(EnvStamp); v {
	case "", "0":
	case "1":
		st.Stamp = true
	default:
		return st, fmt.Errorf("%s=%q: want 1 (stamp every streamed chunk) or 0", EnvStamp, v)
	}
	switch v := getenv(EnvDeviceIDs); v {
	case "", "any":
	case "int":
		if err := parseDevicesAsInts(getenv("CUDA_VISIBLE_DEVICES")); err != nil {
			return st, err
		}
	default:
		return st, fmt.Errorf("%s=%q: want int (vLLM before 0.24) or any", EnvDeviceIDs, v)
	}
	if st.Era, err = parseEra(getenv(EnvEra)); err != nil {
		return st, err
	}
	if st.Device, err = parseDevice(getenv(EnvDevice)); err != nil {
		return st, err
	}
	for _, b := range []struct {
		env string
		to  *bool
	}{{EnvRustFrontend, &st.RustFrontend}, {EnvReleaseHostMemory, &st.ReleaseHostMemory}, {EnvPoisonPages, &st.PoisonPages}, {EnvPlainOpMetrics, &st.PlainOpMetrics}} {
		if *b.to, err = envBool(b.env, getenv(b.env)); err != nil {
			return st, err
		}
	}
	if st.Faults, err = ParseFaults(getenv(EnvFaults)); err != nil {
		return st, err
	}
	st.APIKey = getenv("VLLM_API_KEY")
	st.GPUDir = getenv(simgpu.EnvDir)
	st.CacheDir = getenv(EnvCacheDir)
	if st.CacheDir == "" && getenv("VLLM_CACHE_ROOT") != "" {
		// vLLM keeps its torch.compile cache under VLLM_CACHE_ROOT.
		st.CacheDir = filepath.Join(getenv("VLLM_CACHE_ROOT"), "torch_compile_cache")
	}
	if st.CacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			d = os.TempDir()
		}
		st.CacheDir = filepath.Join(d, "vllmsim")
	}
	return st, nil
}

// parseDevicesAsInts is how vLLM before 0.24 read CUDA_VISIBLE_DEVICES at
// start: int() of the engine's entry (vllm/platforms/interface.py,
// device_id_to_physical_device_id), so a GPU-… UUID there was a ValueError
// that ended the server (vllm-project/vllm#13815, #20939). vllmsim's engine
// is device 0: its entry is the first.
func parseDevicesAsInts(visible string) error {
	if visible == "" {
		return nil
	}
	e, _, _ := strings.Cut(visible, ",")
	if _, err := strconv.Atoi(e); err != nil {
		return fmt.Errorf("ValueError: invalid literal for int() with base 10: '%s'", e)
	}
	return nil
}

// Main runs `vllmsim serve MODEL [flags]` until ctx ends; it returns the exit code.
func Main(ctx context.Context, argv []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return run(ctx, argv, getenv, stdout, stderr, openCUDA)
}

// run is Main with real-device mode's GPU opened by openGPU (tests give a fake).
func run(ctx context.Context, argv []string, getenv func(string) string, stdout, stderr io.Writer, openGPU func() (gpuMemory, error)) int {
	lg := log.New(stdout, "INFO ", log.LstdFlags|log.Lmicroseconds)
	e, err := parseEra(getenv(EnvEra))
	if err != nil {
		fmt.Fprintf(stderr, "vllmsim: %v\n", err)
		return 1
	}
	args, err := parseArgs(argv, e, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		// argparse: an unknown flag is the top-level parser's error, a bad
		// value the subcommand's (exit 2 both).
		prog := "vllm serve"
		if strings.HasPrefix(err.Error(), "unrecognized arguments") {
			prog = "vllm"
		}
		fmt.Fprintf(stderr, "%s: error: %v\n", prog, err)
		return 2
	}
	st, err := SettingsFromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "vllmsim: %v\n", err)
		return 1
	}
	st.openGPU = openGPU
	if err := serve(ctx, args, st, lg); err != nil {
		fmt.Fprintf(stderr, "ERROR %v\n", err)
		return 1
	}
	return 0
}

// serve runs one simulated `vllm serve` until ctx ends: the simulated GPU,
// the memory plan, the port, start-up, then the HTTP API.
func serve(ctx context.Context, args Args, st Settings, lg *log.Logger) error {
	if args.APIKey == "" {
		args.APIKey = st.APIKey
	}
	model, err := st.Profile.Model(args.Model)
	if err != nil {
		return err
	}
	if args.MaxModelLen == 0 {
		args.MaxModelLen = 32768
	}
	if args.SleepModeBackend != "" && st.Era != eraProposed {
		// The flag came with the sleep-mode backend factory (RFC #34303);
		// older vLLM's argparse refuses it.
		return fmt.Errorf("vllm serve: error: unrecognized arguments: --sleep-mode-backend %s (%s=%s: vLLM before the sleep-mode backends)", args.SleepModeBackend, EnvEra, st.Era)
	}
	var dev *device
	var gpuDir, where string
	var phys Physics
	if st.Device == deviceCUDA {
		if dev, phys, where, err = openRealDevice(args, st, model, st.openGPU); err != nil {
			return err
		}
	} else {
		dirs, removeDirs, err := openGPUs(st, args.TensorParallelSize)
		if err != nil {
			return err
		}
		defer removeDirs()
		gpuDir = dirs[0]
		info, err := simgpu.ReadDevice(gpuDir)
		if err != nil {
			return err
		}
		if phys, err = planMemory(args, st, model, info); err != nil {
			return err
		}
		ranks, err := startRanks(dirs, args.TensorParallelSize, args.ServedName())
		if err != nil {
			return err
		}
		dev, where = &device{ranks: ranks, info: info}, "simulated GPU "+info.Name
	}
	defer dev.stop()
	sock, err := bindCheck(args)
	if err != nil {
		return err
	}
	defer sock.close()
	pid := os.Getpid()
	info, ranks := dev.info, dev.ranks
	if len(ranks) > 1 {
		pids := make([]string, len(ranks))
		for i, r := range ranks {
			pids[i] = strconv.Itoa(r.pid)
		}
		lg.Printf("vllmsim tensor parallel size %d: rank processes %s, each with %.2f GiB of weights", len(ranks), strings.Join(pids, ", "), float64(phys.WeightBytes())/GiB)
	}

	lg.Printf("vllmsim %s serving %s (profile %s, time scale %g, %s)", st.Era.version(), args.Model, st.Profile.Name, st.TimeScale, where)
	// Host figures measured on a sim are its bytes × this scale: the
	// harness reads it from here to label them simulated/scaled.
	if dev.real != nil {
		lg.Printf("vllmsim real-device mode: a level-1 sleep pins %.2f GiB of host memory (cuMemAllocHost) for the weights' copy", float64(phys.TotalWeightBytes())/GiB)
	} else {
		lg.Printf("vllmsim host memory scale %g: a level-1 sleep really allocates %.3f GiB pinned (+ %.3f GiB transient) for %.2f GiB of weights",
			st.HostScale, float64(phys.TotalWeightBytes())*st.HostScale/GiB, float64(phys.TotalWeightBytes())*st.HostScale*stagingFraction/GiB, float64(phys.TotalWeightBytes())/GiB)
	}
	var pw *power // real-device mode: the device's own energy counter, nothing simulated
	if dev.real == nil {
		if pw, err = newPower(gpuDir, pid, args.ServedName(), info); err != nil {
			lg.Printf("ERROR simulated GPU power: %v", err)
		}
	}
	for _, r := range ranks[1:] { // the other ranks draw on their GPUs' counters
		if err := pw.addRank(r.dir, r.pid, args.ServedName()); err != nil {
			lg.Printf("ERROR simulated GPU power of rank %d: %v", r.index, err)
		}
	}
	host := &hostMemory{scale: st.HostScale}
	if len(ranks) > 1 {
		host.ranks = ranks // each rank's worker holds its shard of each backup
	}
	defer func() {
		if err := pw.stop(); err != nil {
			lg.Printf("ERROR simulated GPU power: %v", err)
		}
		if err := host.releaseAll(); err != nil { // a start that failed before serving (else released already)
			lg.Printf("ERROR %v", err)
		}
	}()
	for _, p := range []struct {
		on        bool
		env, what string
	}{{st.ReleaseHostMemory, EnvReleaseHostMemory, "vllm#55206, open"}, {st.PoisonPages, EnvPoisonPages, "vllm#52597, open"}} {
		if p.on && st.Era != eraProposed {
			// A released vLLM does not read it; vllmsim says so rather than act on it.
			lg.Printf("WARNING vllmsim: %s is proposed (%s), not in a release: ignored with %s=%s (set %s=proposed)", p.env, p.what, EnvEra, st.Era, EnvEra)
		}
	}
	if st.PlainOpMetrics && !st.Era.since(eraD) {
		lg.Printf("WARNING vllmsim: %s names the operation metrics of vLLM ≥ 0.32 (#52864): ignored with %s=%s, which has none", EnvPlainOpMetrics, EnvEra, st.Era)
	}
	if note := phys.optionsNote(); note != "" {
		lg.Printf("%s", note)
	}
	if len(args.Unmodelled) > 0 {
		lg.Printf("vllmsim accepted, without modelling them: %s", strings.Join(args.Unmodelled, "; "))
	}
	if st.DevMode {
		lg.Printf("WARNING SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!")
	}
	c := clock{scale: st.TimeScale}
	kvUsage := func(running int) float64 {
		// 4 KiB per token per layer (GQA-8, bf16) at an average of half the context.
		perSeq := float64(args.MaxModelLen) / 2 * float64(model.Layers) * 4096
		return min(1, float64(running)*perSeq/float64(phys.KVBytes))
	}
	s := &server{args: args, phys: phys, clock: c, dev: dev, log: lg, devMode: st.DevMode, created: time.Now().Unix(),
		era: st.Era, backend: args.SleepModeBackend,
		releaseHostMem: st.ReleaseHostMemory && st.Era == eraProposed, poisonPages: st.PoisonPages && st.Era == eraProposed,
		m:     newMetrics(args.ServedName(), kvUsage, metricsOpts{newest: st.Era == eraProposed, ops: st.Era.since(eraD), legacy: st.Era != eraProposed || !st.RustFrontend, plainOps: st.PlainOpMetrics, specTokens: args.specTokens()}),
		power: pw, host: host,
		faults: st.Faults, stamp: st.Stamp, exit: func(code int) {
			_ = pw.stop()
			dev.stop()
			os.Exit(code)
		}}
	if s.faults == nil {
		s.faults = &Faults{}
	}
	s.eng = newEngine(phys, c, s.m)
	s.eng.prefix = &prefixCache{on: args.EnablePrefixCaching}
	if sc := args.Speculative; sc != nil {
		s.eng.spec = &spec{k: sc.NumTokens, accept: phys.Model.specAcceptance(), draftCost: specDraftCost}
		lg.Printf("Speculative decoding: method %q, %d draft tokens a step, acceptance %.2f (simulated)", sc.Method, sc.NumTokens, s.eng.spec.accept)
	}
	s.eng.extraPrefill, s.eng.extraDecode = s.faults.slow("prefill"), s.faults.slow("decode")
	s.eng.onStepping = s.syncPower
	if dev.real != nil {
		s.eng.readWeights = func() {
			if err := dev.real.readWeights(); err != nil {
				lg.Printf("ERROR %v", err)
			}
		}
	}
	defer s.close() // before the process entry is removed (deferred above)
	defer func() {  // the host backups, once no sleep or wake runs (serveHTTP has shut down); a sleep outliving it allocates none
		s.opMu.Lock()
		defer s.opMu.Unlock()
		if err := host.releaseAll(); err != nil {
			lg.Printf("ERROR %v", err)
		}
	}()
	if err := s.startCompiled(ctx, st.CacheDir); err != nil {
		return err
	}
	return s.serveHTTP(ctx, sock, pid)
}

// openGPUs are the simulated GPUs the server's n ranks publish to:
// VLLMSIM_GPU_DIR's (a list, one per GPU), each created from the profile
// when it does not exist yet, or private ones that remove deletes.
func openGPUs(st Settings, n int) (dirs []string, remove func(), err error) {
	dirs, remove = gpuDirs(st.GPUDir), func() {}
	if len(dirs) == 0 {
		for range n {
			d, err := os.MkdirTemp("", "vllmsim-gpu-")
			if err != nil {
				remove()
				return nil, nil, err
			}
			dirs = append(dirs, d)
		}
		private := slices.Clone(dirs)
		remove = func() {
			for _, d := range private {
				os.RemoveAll(d)
			}
		}
	}
	for _, dir := range dirs {
		if _, err := simgpu.ReadDevice(dir); err == nil {
			continue
		}
		if err := simgpu.Create(dir, st.Profile.GPU.Device()); err != nil {
			remove()
			return nil, nil, err
		}
	}
	return dirs, remove, nil
}

// planMemory is the server's memory model: the KV cache --kv-cache-memory
// asks for, else what --gpu-memory-utilization leaves after the weights,
// refused as vLLM refuses it when nothing is left.
func planMemory(args Args, st Settings, model Model, info simgpu.Device) (Physics, error) {
	phys := Physics{GPU: st.Profile.GPU, Model: model, KVBytes: args.KVCacheBytes, Ranks: args.TensorParallelSize}
	if args.TensorParallelSize > 1 {
		phys.ExtraResidualBytes = commBytesPerRank
	}
	if st.Faults != nil {
		phys.ExtraResidualBytes += uint64(st.Faults.TPResidualGiB * GiB)
	}
	if !args.EnforceEager { // the CUDA graphs a start captures (sleepopts.go)
		phys.GraphBytes = graphBytes(phys.Model)
	}
	if err := sleepOptions(&phys, args); err != nil {
		return phys, err
	}
	if phys.KVBytes == 0 {
		avail := args.GPUMemUtilization*float64(info.TotalBytes) - float64(phys.WeightBytes()+phys.ResidualBytes())
		if avail <= 0 {
			return phys, errors.New("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine")
		}
		phys.KVBytes = uint64(avail)
	}
	return phys, nil
}

// boundSocket is the server's port, bound at start and listened on once
// start-up is done: vLLM binds it before the engine is set up and listens
// only when ready (vllm/entrypoints/openai/api_server.py run_server:
// "bind the port before the engine is set up ... see vllm#8204";
// create_server_socket: SO_REUSEADDR, bind, no listen), so a port in use
// fails at once, no other server takes it meanwhile, and a client is
// refused until the server is ready. Newer copies of create_server_socket
// also set SO_REUSEPORT, with which two vLLM servers on one port both
// start and share it; vllmsim does not, so a port is one server's.
type boundSocket struct {
	addr string
	fd   int // -1 once listened on or closed
}

// bindCheck binds the address the server will listen on; an address in
// use fails at once, as vLLM's does.
func bindCheck(args Args) (*boundSocket, error) {
	host := args.Host
	if host == "" {
		host = "0.0.0.0"
	}
	addr := net.JoinHostPort(host, strconv.Itoa(args.Port))
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", addr, err)
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(&syscall.SockaddrInet4{Port: ta.Port})
	if ip4 := ta.IP.To4(); ip4 != nil || ta.IP == nil {
		if ip4 != nil {
			copy(sa.(*syscall.SockaddrInet4).Addr[:], ip4)
		}
	} else {
		family = syscall.AF_INET6
		sa6 := &syscall.SockaddrInet6{Port: ta.Port}
		copy(sa6.Addr[:], ta.IP.To16())
		sa = sa6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for %s: %w", addr, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("socket for %s: %w", addr, err)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("[Errno 98] error while attempting to bind on address %s: address already in use (%v)", addr, err)
	}
	return &boundSocket{addr: addr, fd: fd}, nil
}

// listen starts listening on the bound port.
func (b *boundSocket) listen() (net.Listener, error) {
	if err := syscall.Listen(b.fd, syscall.SOMAXCONN); err != nil {
		return nil, fmt.Errorf("listen on %s after start-up: %w", b.addr, err)
	}
	f := os.NewFile(uintptr(b.fd), b.addr)
	b.fd = -1
	defer f.Close() // the listener holds its own descriptor
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen on %s after start-up: %w", b.addr, err)
	}
	return ln, nil
}

// close releases the port if it was never listened on.
func (b *boundSocket) close() {
	if b.fd >= 0 {
		syscall.Close(b.fd)
		b.fd = -1
	}
}

// startCompiled starts the engine up, warm when cacheDir holds the model's
// compile marker, and leaves the marker after a cold start.
func (s *server) startCompiled(ctx context.Context, cacheDir string) error {
	marker := filepath.Join(cacheDir, "compiled-"+strings.NewReplacer("/", "_", " ", "_").Replace(s.args.Model))
	_, statErr := os.Stat(marker)
	warm := statErr == nil
	if err := s.startup(ctx, warm); err != nil {
		return err
	}
	if !warm {
		if err := os.MkdirAll(cacheDir, 0o755); err == nil {
			_ = os.WriteFile(marker, []byte(s.era.version()+"\n"), 0o644)
		}
	}
	return nil
}

// serveHTTP runs the engine and the HTTP API on the bound port until ctx
// ends (then shuts both down) or the listener fails.
func (s *server) serveHTTP(ctx context.Context, sock *boundSocket, pid int) error {
	lg := s.log
	addr := sock.addr
	ln, err := sock.listen()
	if err != nil {
		return err
	}
	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	go s.eng.run(engCtx)
	hs := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	lg.Printf("Started server process [%d]", pid)
	lg.Printf("Uvicorn running on http://%s (Press CTRL+C to quit)", addr)
	lg.Printf("Application startup complete.")

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	lg.Printf("Shutting down")
	stopEngine()
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close()
	}
	return nil
}
