package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/vllmsim"
)

// boundCase is a valid config changed in one key: Validate must refuse
// it with a line starting with want (the key, the value, the range); a
// want "a…b" is a line starting with a that holds b (a path between).
type boundCase struct {
	name string
	mod  func(t *testing.T, c *Config)
	want string
}

// checkRefused runs the cases: each is refused naming its key, and is the
// only line (the default config it starts from is valid). The cases start
// from SimDefault, the config a build without the gpu tag has, so that they
// hold the same under -tags gpu (whose default is vllm on NVML); a case
// about the real backend says so (onNVML).
func checkRefused(t *testing.T, cases []boundCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := SimDefault()
			tc.mod(t, &c)
			err := c.Validate()
			require.Error(t, err)
			start, rest, _ := strings.Cut(tc.want, "…")
			line := err.Error()
			assert.True(t, strings.HasPrefix(line, start) && strings.Contains(line, rest), "want a line %q…%q, got %q", start, rest, line)
			assert.Len(t, strings.Split(err.Error(), "\n"), 1, "one problem, one line: %v", err)
		})
	}
}

// checkAccepted runs the cases that must still validate: the bounds'
// edges and the values that turn a key off.
func checkAccepted(t *testing.T, cases map[string]func(t *testing.T, c *Config)) {
	t.Helper()
	for name, mod := range cases {
		t.Run("accepted/"+name, func(t *testing.T) {
			c := SimDefault()
			mod(t, &c)
			assert.NoError(t, c.Validate())
		})
	}
}

// onNVML is c on a real GPU's backend: vllm and NVML.
func onNVML(c *Config) { c.Command, c.Memory = "vllm", "nvml" }

// TestTimeoutsBounded: a poll interval under 1 ms (NewTicker panics on a
// 0 interval) or over a minute, and any timeout that is not a positive
// number of seconds up to a day (1e300 or +Inf overflow time.Duration),
// are refused naming the key.
func TestTimeoutsBounded(t *testing.T) {
	cases := []boundCase{
		{"poll 1e-7 ms", func(_ *testing.T, c *Config) { c.Timeouts.PollMS = 1e-7 }, "timeouts.poll_ms: 1e-07: want a readiness poll interval in [1, 60000] ms"},
		{"poll 1e300 ms", func(_ *testing.T, c *Config) { c.Timeouts.PollMS = 1e300 }, "timeouts.poll_ms: 1e+300: want a readiness poll interval in [1, 60000] ms"},
		{"poll NaN", func(_ *testing.T, c *Config) { c.Timeouts.PollMS = math.NaN() }, "timeouts.poll_ms: NaN: want"},
	}
	for _, k := range []string{"start_s", "request_s", "sleep_s", "wake_s", "stop_s"} {
		for _, v := range []float64{1e300, math.Inf(1), math.NaN(), MaxTimeoutS + 1} {
			cases = append(cases, boundCase{fmt.Sprintf("%s %v", k, v), func(_ *testing.T, c *Config) { *timeout(c, k) = v },
				fmt.Sprintf("timeouts.%s: %v: want seconds in (0, 86400] (at most a day)", k, v)})
		}
	}
	checkRefused(t, cases)
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"poll 1 ms":     func(_ *testing.T, c *Config) { c.Timeouts.PollMS = 1 },
		"poll a minute": func(_ *testing.T, c *Config) { c.Timeouts.PollMS = 60000 },
		"start a day":   func(_ *testing.T, c *Config) { c.Timeouts.StartS = MaxTimeoutS },
	})
}

// timeout is the timeouts field with JSON key k.
func timeout(c *Config, k string) *float64 {
	t := &c.Timeouts
	return map[string]*float64{"start_s": &t.StartS, "request_s": &t.RequestS, "sleep_s": &t.SleepS, "wake_s": &t.WakeS, "stop_s": &t.StopS}[k]
}

// TestSimBounded: sim.time_scale +Inf (WAKEBENCH_SIM_TIME_SCALE=+Inf) was
// refused only when report.json was written (json: unsupported value);
// it is refused at load, as is a sim.host_scale of +Inf and a profile
// vllmsim does not have.
func TestSimBounded(t *testing.T) {
	for name, tc := range map[string]struct{ env, want string }{
		"time scale +Inf": {"WAKEBENCH_SIM_TIME_SCALE", "sim.time_scale: +Inf: want a factor in (0, 1000] on every modelled duration"},
		"host scale +Inf": {"WAKEBENCH_SIM_HOST_SCALE", "sim.host_scale: +Inf: must be in (0, 1]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(env(map[string]string{tc.env: "+Inf"}))
			require.Error(t, err)
			assert.Equal(t, "config: "+tc.want, err.Error()[:len("config: "+tc.want)])
		})
	}
	checkRefused(t, []boundCase{
		{"time scale 1e300", func(_ *testing.T, c *Config) { c.Sim.TimeScale = 1e300 }, "sim.time_scale: 1e+300: want a factor in (0, 1000]"},
		{"time scale NaN", func(_ *testing.T, c *Config) { c.Sim.TimeScale = math.NaN() }, "sim.time_scale: NaN: want a factor in (0, 1000]"},
		{"unknown profile", func(_ *testing.T, c *Config) { c.Sim.Profile = "h200" }, `sim.profile: "h200": not a vllmsim profile (want one of a100, demo, h100, h100-pcie-gen3x8, l20, tiny)`},
		{"unknown device", func(_ *testing.T, c *Config) { c.Sim.Device = "gpu" }, `sim.device: "gpu": want sim (the simulated GPU, the default) or cuda`},
		{"real device on the simulated GPU", func(_ *testing.T, c *Config) { c.Sim.Device = "cuda" }, `sim.device: "cuda" puts vllmsim's memory on the real GPU NVML measures: want command "vllmsim" and memory "nvml" (have "vllmsim", "sim")`},
		{"real device at a host scale", func(_ *testing.T, c *Config) { c.Sim.Device, c.Memory, c.Sim.HostScale = "cuda", "nvml", 0.5 }, `sim.host_scale: 0.5 with sim.device "cuda": real-device mode pins the real weights' bytes`},
		{"real device across GPUs", func(_ *testing.T, c *Config) {
			c.Sim.Device, c.Memory, c.GPUs = "cuda", "nvml", 2
			c.Models[0].ExtraArgs = []string{"--tensor-parallel-size", "2"}
		}, `models[0].extra_args: --tensor-parallel-size 2 with sim.device "cuda": real-device mode runs a server on one GPU`},
		{"link probe negative", func(_ *testing.T, c *Config) { c.Protocol.LinkProbeMiB = -1 }, "protocol.link_probe_mib: -1: want 0 (no link probe) or MiB in [1, 4096]"},
	})
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"time scale 1000":                  func(_ *testing.T, c *Config) { c.Sim.TimeScale = 1000 },
		"real device":                      func(_ *testing.T, c *Config) { c.Sim.Device, c.Memory = "cuda", "nvml" },
		"no link probe":                    func(_ *testing.T, c *Config) { c.Protocol.LinkProbeMiB = 0 },
		"any profile name without vllmsim": func(_ *testing.T, c *Config) { c.Command, c.Memory, c.Sim.Profile = "vllm", "none", "h200" },
	})
}

// TestSimProfilesAreVllmsims: config's list of vllmsim profiles (config
// imports no internal package) is vllmsim's own.
func TestSimProfilesAreVllmsims(t *testing.T) {
	assert.Equal(t, vllmsim.ProfileNames(), SimProfiles)
	assert.Equal(t, vllmsim.EnvFaults, simFaultsEnv, "the variable sim_faults sets")
}

// TestProtocolBounded: settle_s NaN, settle_s 0 while level-0 cycles run
// (their request held by the pause would be sent after the wake), a
// cost_dwell_s too short for the energy counter to move, and the other
// protocol keys that took NaN, +Inf or overflowing values.
func TestProtocolBounded(t *testing.T) {
	checkRefused(t, []boundCase{
		{"settle NaN", func(_ *testing.T, c *Config) { c.Protocol.SettleS = math.NaN() }, "protocol.settle_s: NaN: want seconds in [0, 3600]"},
		{"settle +Inf", func(_ *testing.T, c *Config) { c.Protocol.SettleS = math.Inf(1) }, "protocol.settle_s: +Inf: want seconds in [0, 3600]"},
		{"settle negative", func(_ *testing.T, c *Config) { c.Protocol.SettleS = -1 }, "protocol.settle_s: -1: want seconds in [0, 3600]"},
		{"settle 0 with level-0 cycles", func(_ *testing.T, c *Config) { c.Protocol.SettleS = 0 },
			"protocol.settle_s: 0 with sleep_l0_cycles 3: a level-0 cycle sends a request while paused and wakes the model once the server has taken it, waiting at most settle_s for that"},
		{"window pad NaN", func(_ *testing.T, c *Config) { c.Protocol.WindowPadS = math.NaN() }, "protocol.window_pad_s: NaN: want seconds in [0, 3600]"},
		{"window pad 1e300", func(_ *testing.T, c *Config) { c.Protocol.WindowPadS = 1e300 }, "protocol.window_pad_s: 1e+300: want seconds in [0, 3600]"},
		{"cost dwell 1e-6", func(_ *testing.T, c *Config) { c.Protocol.CostDwellS = 1e-6 },
			"protocol.cost_dwell_s: 1e-06: want 0 (the state-cost phase off) or seconds in [0.1, 3600] (the phase's own readings take milliseconds)"},
		{"cost dwell under a second on NVML", func(_ *testing.T, c *Config) { onNVML(c); c.Protocol.CostDwellS = 0.5 },
			"protocol.cost_dwell_s: 0.5: want 0 (the state-cost phase off) or seconds in [1, 3600] (NVML's energy counter moves with its power reading, about every 100 ms"},
		{"cost dwell NaN", func(_ *testing.T, c *Config) { c.Protocol.CostDwellS = math.NaN() }, "protocol.cost_dwell_s: NaN: want 0"},
		{"kv +Inf", func(_ *testing.T, c *Config) { c.Protocol.KVGiB = math.Inf(1) }, "protocol.kv_gib: +Inf: at most 1024 GiB"},
		{"context beyond any model", func(_ *testing.T, c *Config) { c.Protocol.ContextTokens = 1 << 62 }, "protocol.context_tokens: 4611686018427387904: at most 16777216 tokens"},
	})
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"settle 0 without level-0 cycles": func(_ *testing.T, c *Config) { c.Protocol.SettleS, c.Protocol.SleepL0Cycles = 0, 0 },
		"cost dwell 0 (off)":              func(_ *testing.T, c *Config) { c.Protocol.CostDwellS = 0 },
		"cost dwell 0 (off) on NVML":      func(_ *testing.T, c *Config) { onNVML(c); c.Protocol.CostDwellS = 0 },
		"cost dwell 1 s on NVML":          func(_ *testing.T, c *Config) { onNVML(c); c.Protocol.CostDwellS = 1 },
		"cost dwell 0.1 s simulated":      func(_ *testing.T, c *Config) { c.Protocol.CostDwellS = 0.1 },
	})
}

// TestThresholdsBounded: a host headroom no host has (refused only when a
// level-1 sleep was due) and an infinite regression limit (every other
// threshold refused Inf).
func TestThresholdsBounded(t *testing.T) {
	checkRefused(t, []boundCase{
		{"headroom 1e6 GiB", func(_ *testing.T, c *Config) { c.Thresholds.MinHostHeadroomGiB = 1e6 },
			"thresholds.min_host_headroom_gib: 1e+06: at most 65536 GiB (64 TiB: more than any one host holds"},
		{"a model's headroom 1e6 GiB", func(_ *testing.T, c *Config) {
			c.Models[0].Thresholds = map[string]float64{"min_host_headroom_gib": 1e6}
		},
			"models[0].thresholds.min_host_headroom_gib: 1e+06: at most 65536 GiB"},
		{"regression +Inf", func(_ *testing.T, c *Config) { c.Thresholds.RegressionPercent = math.Inf(1) }, "thresholds.regression_percent: +Inf: want a finite percent ≥ 0"},
	})
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"headroom 64 TiB": func(_ *testing.T, c *Config) { c.Thresholds.MinHostHeadroomGiB = MaxHostHeadroomGiB },
		"regression 1e6":  func(_ *testing.T, c *Config) { c.Thresholds.RegressionPercent = 1e6 },
	})
}

// fifo makes a named pipe in a temporary directory.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, syscall.Mkfifo(p, 0o600))
	return p
}

// sparse makes a file of n bytes that takes no disk.
func sparse(t *testing.T, p string, n int64) string {
	t.Helper()
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(n))
	require.NoError(t, f.Close())
	return p
}

// TestBaselineEntriesChecked: a baseline that names no file, and entries
// that are no bench.txt (a FIFO hangs the run, /dev/zero fills its memory,
// a huge file is no bench.txt), are refused at load; only os.Stat looks at
// them, so a FIFO never blocks Validate.
func TestBaselineEntriesChecked(t *testing.T) {
	bench := func(t *testing.T, dir string) string {
		p := filepath.Join(dir, "bench.txt")
		require.NoError(t, os.WriteFile(p, []byte("BenchmarkX 1 2 ns/op\n"), 0o644))
		return p
	}
	checkRefused(t, []boundCase{
		{"separators only", func(_ *testing.T, c *Config) { c.Baseline = ", ," }, `baseline: ", ," names no file: want a bench.txt file or a directory of runs`},
		{"blank", func(_ *testing.T, c *Config) { c.Baseline = " " }, `baseline: " " names no file`},
		{"a FIFO", func(t *testing.T, c *Config) { c.Baseline = fifo(t, t.TempDir(), "bench.txt") },
			"baseline: …/bench.txt is a FIFO (reading it waits for a writer): want a bench.txt file or a directory of runs"},
		{"/dev/zero", func(_ *testing.T, c *Config) { c.Baseline = "/dev/zero" }, "baseline: /dev/zero is a character device: want a bench.txt file or a directory of runs"},
		{"beyond 64 MiB", func(t *testing.T, c *Config) {
			c.Baseline = sparse(t, filepath.Join(t.TempDir(), "bench.txt"), MaxBaselineBytes+1)
		},
			"baseline: …/bench.txt holds 67108865 bytes, beyond 64 MiB: not a bench.txt (a run's is kilobytes): want a bench.txt file or a directory of runs"},
		{"a FIFO in a directory of runs", func(t *testing.T, c *Config) {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "run1"), 0o755))
			fifo(t, filepath.Join(dir, "run1"), "bench.txt")
			c.Baseline = dir
		}, "baseline: …/run1/bench.txt is a FIFO (reading it waits for a writer): want a bench.txt file or a directory of runs"},
		{"a directory without runs", func(t *testing.T, c *Config) { c.Baseline = t.TempDir() }, "baseline: …: a directory with no bench.txt, */bench.txt or *.bench.txt: want a bench.txt file or a directory of runs"},
	})
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"a file and a directory": func(t *testing.T, c *Config) {
			a, b := t.TempDir(), t.TempDir()
			c.Baseline = bench(t, a) + ", " + b
			bench(t, b)
		},
		"empty: no gate": func(_ *testing.T, c *Config) { c.Baseline = "" },
		"blank entries between files": func(t *testing.T, c *Config) {
			c.Baseline = ", " + bench(t, t.TempDir()) + ",,"
		},
	})
}

// TestInputFilesChecked: the traffic trace and dataset and the clusters'
// kubeconfigs and binary directories are checked at load, not when their
// phase starts; a FIFO or a device is refused without being opened.
func TestInputFilesChecked(t *testing.T) {
	checkRefused(t, []boundCase{
		{"trace a FIFO", func(t *testing.T, c *Config) { c.Traffic.Trace = fifo(t, t.TempDir(), "t.csv") },
			"traffic.trace: …/t.csv is a FIFO (reading it waits for a writer) (a CSV file of t_s,model,prompt_tokens,output_tokens)"},
		{"dataset a device", func(_ *testing.T, c *Config) {
			c.Traffic.Workload = TrafficWorkload{Kind: "dataset", Dataset: "/dev/zero"}
		},
			"traffic.workload.dataset: /dev/zero is a character device (a JSONL file"},
		{"kubernetes kubeconfig missing", func(_ *testing.T, c *Config) {
			c.Kubernetes.ControlPlane, c.Kubernetes.Kubeconfig = "kubeconfig", "/nonexistent/kubeconfig"
		}, "kubernetes.kubeconfig: stat /nonexistent/kubeconfig: no such file or directory (the cluster's kubeconfig"},
		{"kubernetes bin_dir missing", func(_ *testing.T, c *Config) {
			c.Kubernetes.ControlPlane, c.Kubernetes.BinDir = "local", "/nonexistent/bin"
		},
			"kubernetes.bin_dir: stat /nonexistent/bin: no such file or directory"},
		{"kubernetes namespace", func(_ *testing.T, c *Config) { c.Kubernetes.ControlPlane, c.Kubernetes.Namespace = "local", "Bad_NS!" },
			`kubernetes.namespace: "Bad_NS!" is not a namespace name: a lowercase RFC 1123 label`},
		{"kubernetes timeout 1e300", func(_ *testing.T, c *Config) { c.Kubernetes.ControlPlane, c.Kubernetes.TimeoutS = "local", 1e300 },
			"kubernetes.timeout_s: 1e+300: want seconds in (0, 86400] (at most a day)"},
		{"kubernetes refuse wait +Inf", func(_ *testing.T, c *Config) {
			c.Kubernetes.ControlPlane, c.Kubernetes.RefuseWaitS = "local", math.Inf(1)
		},
			"kubernetes.refuse_wait_s: +Inf: want seconds in (0, 86400]"},
	})
}

// TestTrafficBounded: the traffic keys that took overflowing values.
func TestTrafficBounded(t *testing.T) {
	checkRefused(t, []boundCase{
		{"dwell 1e300", func(_ *testing.T, c *Config) { c.Traffic.MinDwellS = 1e300 }, "traffic.min_dwell_s: 1e+300: want seconds in [0, 86400] (at most a day)"},
		{"burstiness +Inf", func(_ *testing.T, c *Config) { c.Traffic.Arrivals, c.Traffic.Burstiness = "gamma", math.Inf(1) }, "traffic.burstiness: +Inf: want a gamma shape > 0"},
	})
}

// onCluster sets c's fleet to run on a cluster with defaults.
func onCluster(c *Config) { c.Fleet = Fleet{ControlPlane: "kubeconfig"} }

// onLocal sets c's fleet to the local one, with one node.
func onLocal(c *Config) {
	c.Fleet = Fleet{ControlPlane: "local", LocalNodes: []FleetNode{{Name: "node-0", Profile: "tiny"}}}
}

// TestFleetKeysChecked: every fleet key that reached the Job spec, go
// test's flags or the local fleet unchecked is refused at load, naming it.
func TestFleetKeysChecked(t *testing.T) {
	cluster := func(mod func(f *Fleet)) func(*testing.T, *Config) {
		return func(_ *testing.T, c *Config) { onCluster(c); mod(&c.Fleet) }
	}
	local := func(mod func(f *Fleet)) func(*testing.T, *Config) {
		return func(_ *testing.T, c *Config) { onLocal(c); mod(&c.Fleet) }
	}
	checkRefused(t, []boundCase{
		{"unknown profile", local(func(f *Fleet) { f.LocalNodes[0].Profile = "h200" }),
			`fleet.local_nodes[0].profile: "h200": not a vllmsim profile (want one of a100, demo, h100, h100-pcie-gen3x8, l20, tiny)`},
		{"local node name", local(func(f *Fleet) { f.LocalNodes[0].Name = "N 1/x" }), `fleet.local_nodes[0].name: "N 1/x" is not a node name: a lowercase RFC 1123 subdomain`},
		{"namespace", cluster(func(f *Fleet) { f.Namespace = "Bad_NS!" }), `fleet.namespace: "Bad_NS!" is not a namespace name: a lowercase RFC 1123 label must consist of`},
		{"namespace too long", cluster(func(f *Fleet) { f.Namespace = strings.Repeat("a", 64) }), `fleet.namespace: "aaaa…must be no more than 63 characters`},
		{"local namespace", local(func(f *Fleet) { f.Namespace = "mine" }), `fleet.namespace: "mine": the local fleet applies deploy/rbac.yaml, written for namespace wakebench-fleet`},
		{"toleration operator", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Key: "gpu", Operator: "Sometimes"}} }),
			`fleet.tolerations[0].operator: "Sometimes": want "Exists" or "Equal"`},
		{"toleration effect", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Key: "gpu", Operator: "Exists", Effect: "Never"}} }),
			`fleet.tolerations[0].effect: "Never": want "NoSchedule", "PreferNoSchedule", "NoExecute" or "" (every effect)`},
		{"toleration of every taint", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Operator: "Exists"}} }),
			"fleet.tolerations[0]: operator Exists without a key tolerates every taint"},
		{"toleration Exists with a value", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Key: "gpu", Operator: "Exists", Value: "x"}} }),
			`fleet.tolerations[0].value: "x" with operator Exists`},
		{"toleration Equal without a key", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Operator: "Equal", Value: "x", Effect: "NoExecute"}} }),
			"fleet.tolerations[0].key: empty with operator Equal"},
		{"toleration key", cluster(func(f *Fleet) { f.Tolerations = []Toleration{{Key: "a b", Operator: "Exists"}} }), `fleet.tolerations[0].key: "a b" is not a taint key name`},
		{"timeout beyond the deadline", cluster(func(f *Fleet) { f.DeadlineS, f.TimeoutS = 600, 900 }),
			"fleet.timeout_s: 900 beyond deadline_s 600: each node run's go test -timeout must end within the whole run's deadline"},
		{"timeout beyond the default deadline", cluster(func(f *Fleet) { f.TimeoutS = 7200 }), "fleet.timeout_s: 7200 beyond deadline_s 3600"},
		{"deadline NaN", cluster(func(f *Fleet) { f.DeadlineS = math.NaN() }), "fleet.deadline_s: NaN: want 0 (the default) or whole seconds from 1 to 2592000 (30 days)"},
		{"deadline +Inf", cluster(func(f *Fleet) { f.DeadlineS = math.Inf(1) }), "fleet.deadline_s: +Inf: want 0 (the default) or whole seconds"},
		{"deadline 1e300", cluster(func(f *Fleet) { f.DeadlineS = 1e300 }), "fleet.deadline_s: 1e+300: want 0 (the default) or whole seconds"},
		{"deadline half a second (activeDeadlineSeconds 0)", cluster(func(f *Fleet) { f.DeadlineS = 0.5 }), "fleet.deadline_s: 0.5: want 0 (the default) or whole seconds"},
		{"timeout 1e300", cluster(func(f *Fleet) { f.TimeoutS = 1e300 }), "fleet.timeout_s: 1e+300: want 0 (the default) or whole seconds"},
		{"schedule timeout +Inf", cluster(func(f *Fleet) { f.ScheduleTimeoutS = math.Inf(1) }), "fleet.schedule_timeout_s: +Inf: want 0 (the default) or seconds up to 2592000"},
		{"node lost NaN", cluster(func(f *Fleet) { f.NodeLostS = math.NaN() }), "fleet.node_lost_s: NaN: want 0 (the default) or seconds up to 2592000"},
		{"parallelism beyond int32", cluster(func(f *Fleet) { f.Parallelism = 1 << 32 }), "fleet.parallelism: 4294967296: want 0 (every node at once) to 100000"},
		{"run not a regexp", cluster(func(f *Fleet) { f.Run = "(" }), `fleet.run: "(": element 0 ("(") is not a regexp: error parsing regexp: missing closing ): ` + "`(`"},
		{"run's subtest part not a regexp", cluster(func(f *Fleet) { f.Run = "^TestProtocol$/[" }), `fleet.run: "^TestProtocol$/[": element 1 ("[") is not a regexp`},
		{"nodes with the local fleet", local(func(f *Fleet) { f.Nodes = []string{"node-0"} }), `fleet.nodes: given with control_plane "local"`},
		{"local nodes on a cluster", cluster(func(f *Fleet) { f.LocalNodes = []FleetNode{{Name: "n", Profile: "tiny"}} }), `fleet.local_nodes: given with control_plane "kubeconfig"`},
		{"node name", cluster(func(f *Fleet) { f.Nodes = []string{"N 1/x"} }), `fleet.nodes[0]: "N 1/x" is not a node name: a lowercase RFC 1123 subdomain`},
		{"node twice", cluster(func(f *Fleet) { f.Nodes = []string{"a", "a"} }), `fleet.nodes[1]: "a" twice`},
		{"node selector key", cluster(func(f *Fleet) { f.NodeSelector = map[string]string{"a b": "x"} }), `fleet.node_selector: "a b" is not a label key name`},
		{"node selector value", cluster(func(f *Fleet) { f.NodeSelector = map[string]string{"gpu": "a b"} }), `fleet.node_selector.gpu: "a b" is not a label value name`},
		{"resource -1", cluster(func(f *Fleet) { f.Resources = map[string]string{"nvidia.com/gpu": "-1"} }), `fleet.resources.nvidia.com/gpu: "-1": want a quantity > 0`},
		{"resource 0", cluster(func(f *Fleet) { f.Resources = map[string]string{"nvidia.com/gpu": "0"} }), `fleet.resources.nvidia.com/gpu: "0": want a quantity > 0`},
		{"resource name", cluster(func(f *Fleet) { f.Resources = map[string]string{"a b": "1"} }), `fleet.resources: "a b" is not a resource name`},
		{"driver", cluster(func(f *Fleet) { f.Driver = "GPU!" }), `fleet.driver: "GPU!" is not a DRA driver (or "none") name`},
		{"device class", cluster(func(f *Fleet) { f.DeviceClass = "GPU!" }), `fleet.device_class: "GPU!" is not a DeviceClass (or "none") name`},
		{"service account", cluster(func(f *Fleet) { f.ServiceAccount = "Me!" }), `fleet.service_account: "Me!" is not a ServiceAccount name`},
		{"kubeconfig missing", cluster(func(f *Fleet) { f.Kubeconfig = "/nonexistent/kubeconfig" }),
			`fleet.kubeconfig: stat /nonexistent/kubeconfig: no such file or directory (the cluster's kubeconfig; "" uses $KUBECONFIG, ~/.kube/config or the in-cluster config)`},
		{"kubeconfig a directory", cluster(func(f *Fleet) { f.Kubeconfig = "/" }), "fleet.kubeconfig: / is a directory"},
		{"bin_dir missing", local(func(f *Fleet) { f.BinDir = "/nonexistent/bin" }), "fleet.bin_dir: stat /nonexistent/bin: no such file or directory"},
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("apiVersion: v1\n"), 0o600))
	checkAccepted(t, map[string]func(*testing.T, *Config){
		"cluster defaults": cluster(func(*Fleet) {}),
		"local defaults":   local(func(*Fleet) {}),
		"a full cluster fleet": cluster(func(f *Fleet) {
			f.Kubeconfig, f.Namespace, f.ServiceAccount = kubeconfig, "gpu-fleet", "wakebench-fleet"
			f.Nodes, f.NodeSelector = []string{"gpu-node-1.example.com", "gpu-node-2"}, map[string]string{"nvidia.com/gpu.present": "true"}
			f.Driver, f.DeviceClass, f.Resources = "none", "none", map[string]string{"nvidia.com/gpu": "1"}
			f.Tolerations = []Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}, {Key: "dedicated", Operator: "Equal", Value: "gpu"}, {Operator: "Exists", Effect: "NoExecute"}}
			f.Parallelism, f.DeadlineS, f.TimeoutS, f.ScheduleTimeoutS, f.NodeLostS = 8, 7200, 7200, 0.5, 40
			f.Run = "^TestProtocol$/^(restart|baseline)$"
		}),
	})
}
