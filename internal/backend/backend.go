// Package backend is the only package that knows what serves the models and
// what measures the GPU in a run: vllmsim (built from this module) or a
// vLLM command, and the simulated GPU (package simgpu), NVML (go-nvml) or no
// memory source. Open turns a config into a server program, the servers'
// environment and a gpu.Source, and says what the report should call them.
package backend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/simgpu"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// Backend is a run's server program and memory source.
type Backend struct {
	// Command is the server program: the vllmsim binary, or vLLM.
	Command string
	// Source reads GPU memory; nil when the memory source is "none".
	Source gpu.Source
	// Setup is what the report says of device and runtime before any
	// server answers.
	Setup record.Setup
	// CUDA is the CUDA driver version NVML reports, "" without NVML.
	CUDA string

	env []string
	// userEnv is the config's env (NAME=value, sorted), after env and
	// every model's own in each server's environment: it overrides them.
	userEnv []string
	nvml    []*NVMLSource // one per GPU of the run, when memory is nvml
	caches  string        // each model's fresh compile caches under it; "" to leave the runner's
	// measure probes a real GPU's link (measureCUDA; tests give their own).
	measure measureFunc
}

// Open prepares cfg's backend. dir is a private directory for the
// simulated GPU and vllmsim's compile cache; the caller removes it.
// Nothing is started.
func Open(ctx context.Context, cfg config.Config, dir string) (*Backend, error) {
	return open(ctx, cfg, dir, os.Getenv, func() nvml.Interface { return nvml.New() })
}

// open is Open with the environment and the NVML library given (tests).
func open(ctx context.Context, cfg config.Config, dir string, getenv func(string) string, nvmlLib func() nvml.Interface) (*Backend, error) {
	b := &Backend{env: vllm.ServerEnv(cfg.APIKey)}
	if cfg.Protocol.CorrectnessMaxTokens > 0 && cfg.Protocol.PoisonDiscardedPages {
		// With correctness replays on, discarded pages (a level-2 sleep's
		// weights, every KV cache) are filled with 0xFF when woken
		// (VLLM_POISON_DISCARDED_PAGES, proposed in vLLM PR #52597, open;
		// docs/vllm-api.md §10): a wake that skipped reload_weights then
		// answers deterministic garbage the oracle cannot miss, never stale
		// weights that happen to still be in the freed pages. A vLLM
		// without it, every release so far, ignores it.
		b.env = append(b.env, PoisonEnv)
	}
	if cfg.FreshCaches {
		b.caches = filepath.Join(dir, "caches")
	}
	b.Setup = record.Setup{GPU: "unknown GPU (memory source none)", Runtime: "unknown (no server reached)",
		ContextTokens: cfg.Protocol.ContextTokens, KVGiB: cfg.Protocol.KVGiB, MemorySource: cfg.Memory}
	if err := b.openCommand(ctx, cfg, dir, getenv); err != nil {
		return nil, err
	}
	// The config's env, added last to every server's environment
	// (ServerEnv, NodeEnv): a variable it sets overrides wakebench's own
	// (a variant's VLLMSIM_ERA, the GPU's placement, the caches), as exec
	// keeps a name's last value.
	for _, k := range slices.Sorted(maps.Keys(cfg.Env)) {
		b.userEnv = append(b.userEnv, k+"="+cfg.Env[k])
	}
	refs, hows, err := runGPUs(cfg, getenv)
	if err != nil {
		return nil, err
	}
	if err := b.openMemory(cfg, refs, nvmlLib); err != nil {
		return nil, err
	}
	if err := b.placeServers(cfg, refs, hows); err != nil {
		return nil, err
	}
	return b, nil
}

// openCommand finds the server program: vllmsim, built once and set up with
// the profile, the time scale and (memory "sim") its simulated GPU under
// dir, after every model's faults parse; or vLLM (or a path) on PATH.
func (b *Backend) openCommand(ctx context.Context, cfg config.Config, dir string, getenv func(string) string) error {
	if cfg.Command != "vllmsim" {
		p, err := exec.LookPath(cfg.Command)
		if err != nil {
			return fmt.Errorf("config command %q: %w (install vLLM or set command to a path)", cfg.Command, err)
		}
		b.Command = p
		return nil
	}
	prof, err := vllmsim.LookupProfile(cfg.Sim.Profile)
	if err != nil {
		return fmt.Errorf("config sim.profile: %w", err)
	}
	var bad []error
	for i, m := range cfg.Models {
		if _, err := vllmsim.ParseFaults(m.SimFaults); err != nil {
			bad = append(bad, fmt.Errorf("config models[%d].sim_faults: %w", i, err))
		}
	}
	if len(bad) > 0 { // before anything is built or started
		return errors.Join(bad...)
	}
	if p := getenv(EnvSimBinary); p != "" {
		// A vllmsim built elsewhere (make device-check builds it beside the test binaries for
		// a GPU machine without Go).
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s: %w (build it with go build -o %s ./cmd/vllmsim)", EnvSimBinary, err, p)
		}
		b.Command = p
	} else if b.Command, err = BuildSim(ctx); err != nil {
		return err
	}
	if cfg.Sim.Era != "" {
		b.env = append(b.env, SimEraEnv(cfg.Sim.Era))
	}
	b.env = append(b.env,
		vllmsim.EnvProfile+"="+cfg.Sim.Profile,
		vllmsim.EnvTimeScale+"="+strconv.FormatFloat(cfg.Sim.TimeScale, 'g', -1, 64),
		SimHostScaleEnv(cfg.Sim.HostScale))
	note := "simulated: servers are vllmsim (vLLM era " + simEra(cfg.Sim.Era) + ") and GPU memory is modelled (" + prof.Source + "); times are wall-clock at this time scale"
	if cfg.Sim.HostScale != 1 {
		note += fmt.Sprintf("; host memory of a level-1 sleep's pinned backup is %g of the modelled bytes (sim.host_scale)", cfg.Sim.HostScale)
	}
	if cfg.Sim.Device == "cuda" {
		b.env = append(b.env, vllmsim.EnvDevice+"=cuda")
		note = "simulated in part: servers are vllmsim (vLLM era " + simEra(cfg.Sim.Era) + ") in real-device mode: device memory, pinned host memory, the sleeps' and wakes' copies and each step's read of the weights are the real GPU's, unscaled; start-up, checkpoint loads, kernel launches and compute are modelled (" + prof.Source + ") at this time scale"
	}
	b.Setup.Simulated = &record.Simulated{Profile: cfg.Sim.Profile, TimeScale: cfg.Sim.TimeScale, Note: note, RealDevice: cfg.Sim.Device == "cuda"}
	if cfg.Memory == "sim" {
		// One simulated GPU per GPU of the run: a model across several
		// (--tensor-parallel-size) puts a rank process on each.
		var dirs []string
		var srcs []devSource
		for i := range max(1, cfg.GPUs) {
			d := filepath.Join(dir, "gpu")
			if cfg.GPUs > 1 {
				d = filepath.Join(dir, fmt.Sprintf("gpu%d", i))
			}
			if err := simgpu.Create(d, prof.GPU.Device()); err != nil {
				return err
			}
			dirs = append(dirs, d)
			srcs = append(srcs, NewSimSource(d))
		}
		b.env = append(b.env, simgpu.EnvDir+"="+strings.Join(dirs, string(filepath.ListSeparator)))
		b.Source = srcs[0].(gpu.Source)
		if len(srcs) > 1 {
			b.Source = multiSource{devs: srcs}
		}
	}
	return nil
}

// simEra names vllmsim's era as the report shows it ("" is its default).
func simEra(e string) string {
	if e == "" {
		return "d, the newest releases (v0.32, v0.33)"
	}
	return e
}

// runGPUs are the run's GPUs: gpu_index and, for models spanning GPUs, the
// next gpus − 1 (in NVML's order, or the runner's CUDA_VISIBLE_DEVICES),
// each with how it was found. A GPU that cannot be named is an error only
// where something uses it: NVML, or vLLM.
func runGPUs(cfg config.Config, getenv func(string) string) ([]DeviceRef, []string, error) {
	n := max(1, cfg.GPUs)
	refs, hows := make([]DeviceRef, n), make([]string, n)
	for i := range n {
		ref, how, err := deviceRef(cfg.GPUIndex+i, getenv("CUDA_VISIBLE_DEVICES"), getenv("CUDA_DEVICE_ORDER"))
		if err != nil && (cfg.Command != "vllmsim" || cfg.Memory == "nvml") {
			return nil, nil, fmt.Errorf("config gpu_index: %w", err)
		}
		refs[i], hows[i] = ref, how
	}
	return refs, hows, nil
}

// openMemory opens the memory source (NVML on every GPU of the run, or
// none) and writes what it reports of the device into the setup; the
// reference's models must fit a real GPU.
func (b *Backend) openMemory(cfg config.Config, refs []DeviceRef, nvmlLib func() nvml.Interface) error {
	switch cfg.Memory {
	case "nvml":
		for _, ref := range refs {
			ns, err := OpenNVMLDevice(nvmlLib(), ref)
			if err != nil {
				b.Close()
				return fmt.Errorf("config memory \"nvml\": %w", err)
			}
			b.nvml = append(b.nvml, ns)
		}
		b.Source, b.CUDA = b.nvml[0], b.nvml[0].Facts().CUDAVersion
		if len(b.nvml) > 1 {
			devs := make([]devSource, len(b.nvml))
			for i, d := range b.nvml {
				devs[i] = d
			}
			b.Source = nvmlMulti{multiSource{devs: devs}}
		}
	case "none":
		b.Setup.MemoryNote = "memory source none: no GPU memory was sampled, so residual, release and peak figures are absent (n = 0)"
	}
	if fs, ok := b.Source.(gpu.FactSource); ok {
		f := fs.Facts()
		if err := cfg.ReferenceFit(f.TotalBytes); err != nil && b.nvml != nil {
			b.Close()
			return fmt.Errorf("config models: %w", err)
		}
		b.Setup.GPUFacts = &record.GPUFacts{Name: f.Name, UUID: f.UUID, MemoryGiB: float64(f.TotalBytes) / record.GiB,
			DriverVersion: f.DriverVersion, CUDAVersion: f.CUDAVersion, PCIeGen: f.PCIeGen, PCIeWidth: f.PCIeWidth,
			MaxPCIeGen: f.MaxPCIeGen, MaxPCIeWidth: f.MaxPCIeWidth, PCIeGBps: f.PCIeLimitGBps(),
			MemBusWidthBits: f.MemBusWidth, MaxMemClockMHz: f.MaxMemClock, MemoryGBps: f.MemoryGBps(), Simulated: f.Simulated}
	}
	if b.Source != nil {
		d, err := b.Source.Describe()
		if err != nil {
			b.Close()
			return err
		}
		b.Setup.GPU = fmt.Sprintf("%d × %s", len(refs), d)
	}
	return nil
}

// placeServers puts every server on the GPU(s) the memory source watches,
// named by index in PCI bus order, which every vLLM release parses
// (CUDAEnv); the report keeps the UUIDs. vllmsim runs on no GPU.
func (b *Backend) placeServers(cfg config.Config, refs []DeviceRef, hows []string) error {
	var idx []int
	var places []string
	switch {
	case cfg.Command == "vllmsim" && cfg.Sim.Device != "cuda":
		b.Setup.GPUPlacement = "simulated GPU (vllmsim runs on no GPU)"
		return nil
	case b.nvml != nil:
		for i, ns := range b.nvml {
			idx = append(idx, ns.Index())
			places = append(places, fmt.Sprintf("%s, NVML index %d, %s", ns.Facts().UUID, ns.Index(), hows[i]))
		}
	default:
		for i, ref := range refs {
			if ref.UUID != "" {
				return fmt.Errorf("config gpu_index: the runner's CUDA_VISIBLE_DEVICES names %s by UUID: vLLM before 0.24 cannot parse a UUID there (vllm#13815) and without NVML wakebench cannot turn it into an index; set memory \"nvml\", or name the GPU by index with CUDA_DEVICE_ORDER=PCI_BUS_ID (nvidia-smi -L)", ref.UUID)
			}
			idx = append(idx, ref.Index)
			places = append(places, hows[i])
		}
		places = append(places, "no NVML to check it")
	}
	env := CUDAEnv(idx...)
	b.env = append(b.env, env...)
	b.Setup.GPUPlacement = fmt.Sprintf("%s: %s", strings.Join(env, " "), strings.Join(places, "; "))
	return nil
}

// EnvSimBinary names a vllmsim binary to run instead of building one (a GPU machine without
// Go: make device-check).
const EnvSimBinary = "WAKEBENCH_VLLMSIM"

// PoisonEnv makes vLLM fill discarded pages with 0xFF on wake.
const PoisonEnv = "VLLM_POISON_DISCARDED_PAGES=1"

// ServerEnv is the environment of m's server: vLLM's (dev mode, API key),
// vllmsim's settings, the faults the config injects into m, and with
// fresh_caches m's own compile caches, empty at its initial start and
// reused by its warm starts.
func (b *Backend) ServerEnv(m config.Model) []string {
	env := slices.Clip(b.env)
	if m.SimFaults != "" {
		env = append(env, SimFaultsEnv(m.SimFaults))
	}
	if b.caches != "" {
		d := filepath.Join(b.caches, m.Label)
		env = append(env, "VLLM_CACHE_ROOT="+filepath.Join(d, "vllm"), "TORCHINDUCTOR_CACHE_DIR="+filepath.Join(d, "inductor"),
			"TRITON_CACHE_DIR="+filepath.Join(d, "triton"), "CUDA_CACHE_PATH="+filepath.Join(d, "cuda"))
	}
	return append(env, b.userEnv...)
}

// NodeEnv is the environment every server needs, without any one
// model's faults or caches: what a node gives every container it runs.
func (b *Backend) NodeEnv() []string { return append(slices.Clone(b.env), b.userEnv...) }

// RestartBaseline says what the run's starts were, as measured: whether
// each model's initial start compiled its graphs (initial, from vLLM's log:
// model label → "compiled", "loaded from cache" or ""), and with fresh
// caches how much each model's starts wrote into them.
func (b *Backend) RestartBaseline(labels []string, initial map[string]string) string {
	var parts []string
	for _, l := range labels {
		state, ok := initial[l]
		var part string
		switch {
		case !ok:
			part = l + ": no initial start measured"
		case state == "":
			part = l + ": initial start logged no torch.compile (eager?)"
		default:
			part = l + ": initial start " + state
		}
		if b.caches != "" && ok {
			if n, err := dirBytes(filepath.Join(b.caches, l)); err == nil {
				part += fmt.Sprintf(", %s written into its fresh caches", bytesString(n))
			}
		}
		parts = append(parts, part)
	}
	caches := "each model's initial start had fresh, empty compile caches (VLLM_CACHE_ROOT, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, CUDA_CACHE_PATH) that its warm starts reused"
	if b.caches == "" {
		caches = "the runner's own compile caches (fresh_caches off)"
	}
	return "same host, servers started one at a time, " + caches + " (" + strings.Join(parts, "; ") +
		"); weights read from the host's files; not a cold node or container start"
}

func bytesString(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// dirBytes is the size of the files under dir (an error if dir is absent).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}

// Close releases the memory source (NVML needs one Shutdown per Init).
func (b *Backend) Close() error {
	var errs []error
	for _, ns := range b.nvml {
		errs = append(errs, ns.Close())
	}
	return errors.Join(errs...)
}

// SimFaultsEnv is the environment entry that injects vllmsim faults
// (config's sim_faults syntax) into a server.
func SimFaultsEnv(faults string) string { return vllmsim.EnvFaults + "=" + faults }

// SimHostScaleEnv is the environment entry that sets the share of a
// level-1 sleep's pinned host backup vllmsim really allocates.
func SimHostScaleEnv(scale float64) string {
	return vllmsim.EnvHostScale + "=" + strconv.FormatFloat(scale, 'g', -1, 64)
}

// SimEraEnv is the environment entry that makes vllmsim speak era's vLLM
// (config sim.era).
func SimEraEnv(era string) string { return vllmsim.EnvEra + "=" + era }

// SimEnv is the environment of a vllmsim server on its own (benchmarks of
// the harness): profile, time scale, development endpoints, a simulated
// GPU directory and a compile cache under dir, and per-chunk send stamps
// when stamp is set.
func SimEnv(profile, timeScale, dir string, stamp bool) []string {
	env := []string{vllmsim.EnvProfile + "=" + profile, vllmsim.EnvTimeScale + "=" + timeScale, vllmsim.EnvDevMode + "=1",
		simgpu.EnvDir + "=" + filepath.Join(dir, "gpu"), vllmsim.EnvCacheDir + "=" + filepath.Join(dir, "cache")}
	if stamp {
		env = append(env, vllmsim.EnvStamp+"=1")
	}
	return env
}

// simBuild is the one build of vllmsim per process: a memo of an
// idempotent build, written once and only read afterwards.
var simBuild = sync.OnceValues(buildSim)

// SimNode is a simulated GPU of a vllmsim profile, made for one node of a
// local cluster (kubelocal's fleet nodes): the device's product name and
// memory, and the environment its servers need (the profile and the
// device's directory).
type SimNode struct {
	Product     string
	MemoryBytes uint64
	Env         []string
}

// NewSimNode creates the simulated GPU of vllmsim profile in dir.
func NewSimNode(profile, dir string) (SimNode, error) {
	prof, err := vllmsim.LookupProfile(profile)
	if err != nil {
		return SimNode{}, err
	}
	dev := prof.GPU.Device()
	if err := simgpu.Create(dir, dev); err != nil {
		return SimNode{}, err
	}
	return SimNode{Product: dev.Name, MemoryBytes: dev.TotalBytes,
		Env: []string{config.EnvName("sim", "profile") + "=" + profile, simgpu.EnvDir + "=" + dir}}, nil
}

// BuildSim returns the path of the vllmsim program built from this
// module. It is built once per process (go build's cache makes later
// processes cheap) into the user's cache directory, one file per checkout,
// and swapped in atomically, so concurrent test processes each see a
// whole binary of their own source.
func BuildSim(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("build vllmsim: %w", err)
	}
	return simBuild()
}

func buildSim() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "wakebench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build vllmsim: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".vllmsim-*")
	if err != nil {
		return "", fmt.Errorf("build vllmsim: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // no-op after the rename
	// Not under the caller's context: a cancelled first caller must not
	// leave a failed build memoised for every later one.
	out, err := exec.Command("go", "build", "-o", tmp.Name(), "github.com/wakebench/wakebench/cmd/vllmsim").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build vllmsim (go build github.com/wakebench/wakebench/cmd/vllmsim): %w\n%s", err, out)
	}
	// Named by its content: test processes of other checkouts (other
	// sources) build beside this one and must not swap their binary in
	// under this process's servers; the same source gives the same name.
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		return "", fmt.Errorf("build vllmsim: %w", err)
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, "vllmsim-"+hex.EncodeToString(sum[:8]))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("build vllmsim: %w", err)
	}
	return path, nil
}
