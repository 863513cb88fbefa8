package config

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Fleet is the fleet run (TestFleet, docs/fleet.md): the suite on every
// selected GPU node of a cluster, one Pod per node of one Indexed Job,
// merged into one fleet report. Off unless control_plane is set. Zero
// fields take the defaults Defaults() gives.
type Fleet struct {
	// ControlPlane is "local" (a control plane and LocalNodes node agents
	// started here; make fleet) or "kubeconfig" (an existing cluster).
	ControlPlane string `json:"control_plane"`
	Kubeconfig   string `json:"kubeconfig"` // for "kubeconfig" ("": $KUBECONFIG, ~/.kube/config, in-cluster)
	// BinDir holds the local control plane's binaries (default: $WAKEBENCH_K8S_BIN).
	BinDir    string `json:"bin_dir"`
	Namespace string `json:"namespace"` // default wakebench-fleet (created and deleted if missing)
	// Image is the Pods' image: a vLLM image with the test binary as
	// /usr/local/bin/wakebench (deploy/Dockerfile). Locally the node
	// agent runs the test binary itself.
	Image string `json:"image"`
	// Node selection: Nodes (names), else NodeSelector's nodes; with
	// Driver, only nodes publishing a device of that DRA driver (the
	// default: every GPU node).
	Nodes        []string          `json:"nodes"`
	NodeSelector map[string]string `json:"node_selector"`
	Driver       string            `json:"driver"` // default gpu.nvidia.com (local: gpu.wakebench.dev); "none": no ResourceSlice filter
	// DeviceClass is each Pod's claim's DeviceClass ("none": no claim).
	DeviceClass string `json:"device_class"` // default gpu.nvidia.com (local: wakebench's)
	// Resources are the container's extended-resource limits, for a
	// cluster whose GPUs a device plugin offers ({"nvidia.com/gpu": "1"},
	// with device_class and driver "none").
	Resources map[string]string `json:"resources"`
	// ServiceAccount is the Pods' existing ServiceAccount (deploy/rbac.yaml
	// makes wakebench-fleet); "": each run makes its own and deletes it.
	ServiceAccount string       `json:"service_account"`
	Tolerations    []Toleration `json:"tolerations"` // default nvidia.com/gpu Exists NoSchedule
	Parallelism    int          `json:"parallelism"` // nodes at once (0: all)
	// DeadlineS bounds the whole run (the Job's activeDeadlineSeconds).
	DeadlineS float64 `json:"deadline_s"`
	// ScheduleTimeoutS: a Pod not scheduled by then names its node FAIL.
	ScheduleTimeoutS float64 `json:"schedule_timeout_s"`
	// NodeLostS: a node whose Lease has not changed for this long (by the coordinator's clock) while its Pod runs is lost.
	NodeLostS float64 `json:"node_lost_s"`
	// Run is the node runs' go test -run pattern (default: the protocol's
	// tests, as make bench).
	Run string `json:"run"`
	// TimeoutS is each node run's go test -timeout.
	TimeoutS float64 `json:"timeout_s"`
	// LocalNodes are the local fleet's nodes (control_plane local).
	LocalNodes []FleetNode `json:"local_nodes"`
}

// Toleration is a Pod toleration (core/v1's fields).
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"` // Exists or Equal
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// FleetNode is one node of the local fleet: a simulated GPU of the vllmsim
// profile's kind; Fault, set, is a fault the test injects on it
// (evict, oom, lost, unschedulable).
type FleetNode struct {
	Name    string `json:"name"`
	Profile string `json:"profile"`
	Fault   string `json:"fault"`
}

// On says whether the fleet run is configured.
func (f Fleet) On() bool { return f.ControlPlane != "" }

// WithDefaults is f with its zero fields at their defaults.
func (f Fleet) WithDefaults() Fleet {
	local := f.ControlPlane == "local"
	def := func(s *string, d, l string) {
		if *s == "" {
			*s = d
			if local {
				*s = l
			}
		}
	}
	def(&f.Namespace, "wakebench-fleet", "wakebench-fleet")
	def(&f.Image, "wakebench:latest", "none (host processes)")
	def(&f.Driver, "gpu.nvidia.com", "gpu.wakebench.dev")
	def(&f.DeviceClass, "gpu.nvidia.com", "wakebench-fleet-gpu")
	def(&f.Run, "^Test(GPUFacts|Protocol|Outputs)$", "^Test(GPUFacts|Protocol|Outputs)$")
	if f.Tolerations == nil {
		f.Tolerations = []Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}}
	}
	if f.DeadlineS == 0 {
		f.DeadlineS = 3600
	}
	if f.ScheduleTimeoutS == 0 {
		f.ScheduleTimeoutS = 120
	}
	if f.NodeLostS == 0 {
		f.NodeLostS = 40
	}
	if f.TimeoutS == 0 {
		f.TimeoutS = f.DeadlineS
	}
	return f
}

// MaxFleetDeadlineS bounds fleet.deadline_s and the fleet's other waits
// (timeout_s, schedule_timeout_s, node_lost_s): 30 days. A fleet run is
// hours (each node's suite, parallelism nodes at a time); the bound
// catches a typo and keeps every wait a time.Duration, which 1e300 or
// +Inf would overflow.
const MaxFleetDeadlineS = 30 * 24 * 3600

// MaxFleetParallelism bounds fleet.parallelism: an Indexed Job has at
// most 100 000 completions (the Job API refuses more), so no run has more
// nodes to run at once; the bound also keeps it the int32 of the Job's
// spec, which 1<<32 would wrap to 0 (a Job that never starts a Pod).
const MaxFleetParallelism = 100_000

// validateFleetTime refuses a fleet whose nodes' go test -timeout
// (fleet.timeout_s) cannot hold the run each node makes (Estimate: every
// variant in every block, on a variant run), before any Pod is scheduled:
// each node would refuse it after scheduling, saying -timeout, which a
// fleet's user sets here.
func (c Config) validateFleetTime(bad badFunc) {
	if !c.Fleet.On() {
		return
	}
	f := c.Fleet.WithDefaults()
	if est, how := c.Estimate(); est.Seconds() > f.TimeoutS {
		bad("fleet.timeout_s", "%.0f s, but each node's run takes at least %v (%s): set fleet.timeout_s (and fleet.deadline_s) above it",
			f.TimeoutS, est.Round(time.Second), how)
	}
}

// validate checks the fleet's keys.
func (f Fleet) validate(bad func(key, format string, a ...any)) {
	switch f.ControlPlane {
	case "", "local", "kubeconfig":
	default:
		bad("fleet.control_plane", "%q: want \"local\" (make fleet), \"kubeconfig\" (an existing cluster) or \"\" (off)", f.ControlPlane)
	}
	if !f.On() {
		return
	}
	d := f.WithDefaults()
	f.validateCluster(bad, d)
	f.validateWaits(bad, d)
	f.validatePods(bad, d)
	f.validateNodes(bad)
}

// validateCluster checks where the fleet runs: the kubeconfig or the local
// control plane's binaries, the namespace; d is f.WithDefaults().
func (f Fleet) validateCluster(bad badFunc, d Fleet) {
	if f.ControlPlane == "kubeconfig" && f.Kubeconfig != "" {
		checkFile(bad, "fleet.kubeconfig", f.Kubeconfig, `the cluster's kubeconfig; "" uses $KUBECONFIG, ~/.kube/config or the in-cluster config`)
	}
	if f.ControlPlane == "local" && f.BinDir != "" {
		checkDir(bad, "fleet.bin_dir", f.BinDir, "the directory holding the local control plane's binaries")
	}
	checkName(bad, "fleet.namespace", d.Namespace, "a namespace", validation.IsDNS1123Label)
	if f.ControlPlane == "local" && d.Namespace != "wakebench-fleet" {
		bad("fleet.namespace", "%q: the local fleet applies deploy/rbac.yaml, written for namespace wakebench-fleet: leave namespace unset", d.Namespace)
	}
}

// validateWaits checks the fleet's bounds in time and its parallelism.
func (f Fleet) validateWaits(bad badFunc, d Fleet) {
	// deadline_s and timeout_s become whole seconds (the Job's
	// activeDeadlineSeconds, go test -timeout %.0fs): below 1 s they
	// would be 0, which is no deadline, or no timeout.
	whole := func(key string, v float64) bool {
		if !(v == 0 || v >= 1 && v <= MaxFleetDeadlineS && v == math.Trunc(v)) {
			bad("fleet."+key, "%v: want 0 (the default) or whole seconds from 1 to %d (30 days)", v, MaxFleetDeadlineS)
			return false
		}
		return true
	}
	okDeadline, okTimeout := whole("deadline_s", f.DeadlineS), whole("timeout_s", f.TimeoutS)
	if okDeadline && okTimeout && d.TimeoutS > d.DeadlineS {
		bad("fleet.timeout_s", "%v beyond deadline_s %v: each node run's go test -timeout must end within the whole run's deadline (the Job's activeDeadlineSeconds); lower timeout_s or raise deadline_s", d.TimeoutS, d.DeadlineS)
	}
	for _, kv := range []struct {
		k string
		v float64
	}{{"schedule_timeout_s", f.ScheduleTimeoutS}, {"node_lost_s", f.NodeLostS}} {
		if !(kv.v >= 0 && kv.v <= MaxFleetDeadlineS) {
			bad("fleet."+kv.k, "%v: want 0 (the default) or seconds up to %d (30 days)", kv.v, MaxFleetDeadlineS)
		}
	}
	if f.Parallelism < 0 || f.Parallelism > MaxFleetParallelism {
		bad("fleet.parallelism", "%d: want 0 (every node at once) to %d nodes at once (an Indexed Job's limit)", f.Parallelism, MaxFleetParallelism)
	}
}

// validatePods checks what goes into the Job's Pods: the go test -run
// pattern, the claim's DeviceClass and driver, the resources, the
// ServiceAccount and the tolerations.
func (f Fleet) validatePods(bad badFunc, d Fleet) {
	if err := CheckRunPattern(d.Run); err != nil {
		bad("fleet.run", "%q: %v (a go test -run pattern: regexps separated by / for subtests)", d.Run, err)
	}
	if d.Driver != "none" {
		checkName(bad, "fleet.driver", d.Driver, `a DRA driver (or "none")`, validation.IsDNS1123Subdomain)
	}
	if d.DeviceClass != "none" {
		checkName(bad, "fleet.device_class", d.DeviceClass, `a DeviceClass (or "none")`, validation.IsDNS1123Subdomain)
	}
	if f.ServiceAccount != "" {
		checkName(bad, "fleet.service_account", f.ServiceAccount, "a ServiceAccount", validation.IsDNS1123Subdomain)
	}
	for _, name := range slices.Sorted(maps.Keys(f.Resources)) {
		q, err := resource.ParseQuantity(f.Resources[name])
		switch {
		case err != nil || name == "":
			bad("fleet.resources."+name, "%q: want a resource name and a quantity (e.g. \"nvidia.com/gpu\": \"1\")", f.Resources[name])
		case q.Sign() <= 0:
			bad("fleet.resources."+name, "%q: want a quantity > 0 (e.g. \"nvidia.com/gpu\": \"1\")", f.Resources[name])
		}
		if name != "" {
			checkName(bad, "fleet.resources", name, "a resource", validation.IsQualifiedName)
		}
	}
	for i, t := range f.Tolerations {
		key := fmt.Sprintf("fleet.tolerations[%d]", i)
		switch t.Operator {
		case "Exists":
			if t.Value != "" {
				bad(key+".value", "%q with operator Exists, which matches any value: drop value, or use operator Equal", t.Value)
			}
		case "Equal":
			if t.Key == "" {
				bad(key+".key", "empty with operator Equal: only operator Exists may leave the key empty")
			}
			checkName(bad, key+".value", t.Value, "a label value", validation.IsValidLabelValue)
		default:
			bad(key+".operator", "%q: want \"Exists\" or \"Equal\"", t.Operator)
		}
		switch t.Effect {
		case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
		default:
			bad(key+".effect", "%q: want \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\" or \"\" (every effect)", t.Effect)
		}
		if t.Key != "" {
			checkName(bad, key+".key", t.Key, "a taint key", validation.IsQualifiedName)
		} else if t.Operator == "Exists" && (t.Effect == "" || t.Effect == "NoSchedule") {
			// As package fleetjob refuses it when the run starts.
			bad(key, "operator Exists without a key tolerates every taint, also the NoSchedule one that keeps a tested node from a second Pod: name the taint's key")
		}
	}
}

// validateNodes checks the node selection and the local fleet's nodes.
func (f Fleet) validateNodes(bad badFunc) {
	if f.ControlPlane == "local" && len(f.Nodes) > 0 {
		bad("fleet.nodes", `given with control_plane "local": the local fleet's nodes are local_nodes; list them there, or use control_plane "kubeconfig"`)
	}
	if f.ControlPlane == "kubeconfig" && len(f.LocalNodes) > 0 {
		bad("fleet.local_nodes", `given with control_plane "kubeconfig": local_nodes are the local fleet's (control_plane "local"); select a cluster's nodes with nodes or node_selector`)
	}
	for i, n := range f.Nodes {
		key := fmt.Sprintf("fleet.nodes[%d]", i)
		checkName(bad, key, n, "a node", validation.IsDNS1123Subdomain)
		if slices.Index(f.Nodes, n) < i {
			bad(key, "%q twice: list each node once", n)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(f.NodeSelector)) {
		checkName(bad, "fleet.node_selector", k, "a label key", validation.IsQualifiedName)
		checkName(bad, "fleet.node_selector."+k, f.NodeSelector[k], "a label value", validation.IsValidLabelValue)
	}
	if f.ControlPlane == "local" && len(f.LocalNodes) == 0 {
		bad("fleet.local_nodes", "empty: the local fleet needs its nodes (name, profile)")
	}
	seen := map[string]bool{}
	for i, n := range f.LocalNodes {
		key := fmt.Sprintf("fleet.local_nodes[%d]", i)
		if n.Name == "" || n.Profile == "" || seen[n.Name] {
			bad(key, "needs a unique name and a profile")
		}
		seen[n.Name] = true
		if n.Name != "" {
			checkName(bad, key+".name", n.Name, "a node", validation.IsDNS1123Subdomain)
		}
		if n.Profile != "" && !slices.Contains(SimProfiles, n.Profile) {
			bad(key+".profile", "%q: not a vllmsim profile (want one of %s)", n.Profile, strings.Join(SimProfiles, ", "))
		}
		switch n.Fault {
		case "", "evict", "oom", "lost", "unschedulable":
		default:
			bad(key+".fault", "%q: want evict, oom, lost or unschedulable", n.Fault)
		}
	}
}

// RunPattern splits a go test -run pattern as package testing does (its
// splitRegexp): into alternatives at each | outside brackets and
// parentheses, each alternative into one regexp per level at each / there.
func RunPattern(s string) [][]string {
	var alts [][]string
	var alt []string
	brackets, parens := 0, 0
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			brackets++
		case ']':
			if brackets--; brackets < 0 { // an unmatched ']' is legal
				brackets = 0
			}
		case '(':
			if brackets == 0 {
				parens++
			}
		case ')':
			if brackets == 0 {
				parens--
			}
		case '\\':
			i++
		case '/', '|':
			if brackets == 0 && parens == 0 {
				alt = append(alt, s[start:i])
				start = i + 1
				if s[i] == '|' {
					alts, alt = append(alts, alt), nil
				}
			}
		}
	}
	return append(alts, append(alt, s[start:]))
}

// CheckRunPattern compiles a go test -run pattern as package testing
// does (RunPattern), every part a regexp; the error names the first part
// that is not, counting parts from 0 across the alternatives.
func CheckRunPattern(s string) error {
	i := 0
	for _, alt := range RunPattern(s) {
		for _, p := range alt {
			if _, err := regexp.Compile(p); err != nil {
				return fmt.Errorf("element %d (%q) is not a regexp: %w", i, p, err)
			}
			i++
		}
	}
	return nil
}
