package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
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
	if f.DeadlineS < 0 || f.ScheduleTimeoutS < 0 || f.NodeLostS < 0 || f.TimeoutS < 0 || f.Parallelism < 0 {
		bad("fleet", "deadline_s, schedule_timeout_s, node_lost_s, timeout_s and parallelism must not be negative")
	}
	for name, q := range f.Resources {
		if _, err := resource.ParseQuantity(q); err != nil || name == "" {
			bad("fleet.resources."+name, "%q: want a resource name and a quantity (e.g. \"nvidia.com/gpu\": \"1\")", q)
		}
	}
	if f.ControlPlane == "local" && len(f.LocalNodes) == 0 {
		bad("fleet.local_nodes", "empty: the local fleet needs its nodes (name, profile)")
	}
	seen := map[string]bool{}
	for i, n := range f.LocalNodes {
		if n.Name == "" || n.Profile == "" || seen[n.Name] {
			bad(fmt.Sprintf("fleet.local_nodes[%d]", i), "needs a unique name and a profile")
		}
		seen[n.Name] = true
		switch n.Fault {
		case "", "evict", "oom", "lost", "unschedulable":
		default:
			bad(fmt.Sprintf("fleet.local_nodes[%d].fault", i), "%q: want evict, oom, lost or unschedulable", n.Fault)
		}
	}
}
