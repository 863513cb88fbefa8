package kubelocal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/controlplane"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/nodeagent"
)

// GPUTaint is the taint every local fleet node carries, as GPU nodes of
// managed clusters do (GKE, AKS and EKS GPU node pools taint
// nvidia.com/gpu): only Pods tolerating it land there.
var GPUTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// Node labels a local fleet node carries: the GPU product as NVIDIA's GPU
// feature discovery writes it (spaces as dashes), and the vllmsim profile
// it simulates.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUPresent = "nvidia.com/gpu.present"
	LabelProfile    = "wakebench.dev/sim-profile"
)

// FleetNode is one node of a local fleet: a simulated GPU of one kind.
type FleetNode struct {
	Name    string
	Profile string            // vllmsim profile: the node's GPU kind (l20's is demo)
	Labels  map[string]string // besides the GPU labels
}

// FleetOptions are a local fleet's settings.
type FleetOptions struct {
	BinDir string // the control plane's binaries
	Dir    string // work directory
	LogDir string // the components' and containers' logs ("": under Dir)
	// Programs maps a container's command[0] to a host program
	// ("wakebench" → the compiled test binary).
	Programs map[string]string
	Env      []string // every container's environment, besides the node's own
	Nodes    []FleetNode
}

// Fleet is a running local cluster of several GPU nodes.
type Fleet struct {
	CP      *controlplane.ControlPlane
	IP      string
	Clients *kube.Clients
	Agents  []*nodeagent.Agent // in Nodes' order
	Nodes   []FleetNode
}

// StartFleet starts the control plane and one node agent per node, each
// publishing its own simulated GPU (the profile's device, its own
// simulated GPU directory) in its own ResourceSlice under Driver, labelled
// and tainted as a GPU node; each node's containers run with its profile
// (WAKEBENCH_SIM_PROFILE, VLLMSIM_GPU_DIR), so the suite a Pod runs there
// simulates that node's kind. It returns once every node is schedulable;
// on error nothing is left running.
func StartFleet(ctx context.Context, o FleetOptions) (*Fleet, error) {
	if len(o.Nodes) == 0 {
		return nil, errors.New("local fleet: no nodes")
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.BinDir, Dir: filepath.Join(o.Dir, "control-plane"), LogDir: o.LogDir,
		FeatureGates: []string{"DRAConsumableCapacity=true"}})
	if err != nil {
		return nil, err
	}
	f := &Fleet{CP: cp, Nodes: o.Nodes}
	if f.IP, err = hostIP(); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	if f.Clients, err = kube.Connect(cp.Kubeconfig); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	for i, n := range o.Nodes {
		a, err := f.startNode(ctx, o, i, n)
		if err != nil {
			return nil, errors.Join(err, f.Stop())
		}
		f.Agents = append(f.Agents, a)
	}
	return f, nil
}

func (f *Fleet) startNode(ctx context.Context, o FleetOptions, i int, n FleetNode) (*nodeagent.Agent, error) {
	dir := filepath.Join(o.Dir, "nodes", n.Name)
	dev, err := backend.NewSimNode(n.Profile, filepath.Join(dir, "gpu"))
	if err != nil {
		return nil, fmt.Errorf("local fleet node %s: %w", n.Name, err)
	}
	labels := map[string]string{LabelGPUProduct: strings.ReplaceAll(dev.Product, " ", "-"), LabelGPUPresent: "true", LabelProfile: n.Profile}
	for k, v := range n.Labels {
		labels[k] = v
	}
	env := append(append([]string(nil), o.Env...), dev.Env...)
	logDir := o.LogDir
	if logDir != "" {
		logDir = filepath.Join(logDir, n.Name)
	}
	gpu := nodeagent.GPU{Name: "gpu-0", UUID: fmt.Sprintf("GPU-wakebench-simulated-%s-%d", n.Profile, i), Product: dev.Product, MemoryBytes: dev.MemoryBytes}
	a, err := nodeagent.Start(ctx, nodeagent.Options{Node: n.Name, IP: f.IP, Driver: Driver, GPUs: []nodeagent.GPU{gpu}, Clients: f.Clients,
		Programs: o.Programs, Env: env, Dir: dir,
		// The containers reach the API server as their Pod's
		// ServiceAccount (a bound token), as in a cluster: the fleet
		// Pods' RBAC is what lets them upload.
		PodIdentityFrom: f.CP.Kubeconfig, LogDir: logDir, Labels: labels, Taints: []corev1.Taint{GPUTaint}})
	if err != nil {
		return nil, fmt.Errorf("local fleet node %s: %w", n.Name, errors.Join(err, f.CP.Alive()))
	}
	return a, nil
}

// Agent is node name's agent (nil if none).
func (f *Fleet) Agent(name string) *nodeagent.Agent {
	for i, n := range f.Nodes {
		if n.Name == name && i < len(f.Agents) {
			return f.Agents[i]
		}
	}
	return nil
}

// Describe says what ran, for the report.
func (f *Fleet) Describe() string {
	var kinds []string
	for _, n := range f.Nodes {
		kinds = append(kinds, n.Name+" ("+n.Profile+")")
	}
	return fmt.Sprintf("local control plane (kube-apiserver, kube-scheduler, kube-controller-manager v1.34.3 built from source; ready in %.1f s) and %d nodes run by wakebench's node agent, each a simulated GPU published under DRA driver %s: %s",
		f.CP.Started.Seconds(), len(f.Nodes), Driver, strings.Join(kinds, ", "))
}

// Stop stops every node still running and the control plane.
func (f *Fleet) Stop() error {
	var errs []error
	for _, a := range f.Agents {
		errs = append(errs, a.Stop())
	}
	return errors.Join(append(errs, f.CP.Stop())...)
}
