// Package kubelocal is the Kubernetes phase's cluster where there is none:
// the local control plane (package controlplane) and one node (package
// nodeagent) whose GPU is the run's, published under its own DRA driver;
// and the fleet run's (StartFleet): several nodes, each a simulated GPU of
// its own vllmsim profile.
package kubelocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/kubephase"

	"github.com/wakebench/wakebench/internal/controlplane"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/nodeagent"
	"github.com/wakebench/wakebench/internal/server"
)

// The local node and the DRA driver its GPU is published under.
const (
	Node   = "wakebench-node"
	Driver = "gpu.wakebench.dev"
)

// Options are the local cluster's settings.
type Options struct {
	BinDir string // the control plane's binaries
	Dir    string // work directory
	LogDir string // the components' and containers' logs ("": under Dir)
	// Program runs the Pods' `vllm` command (vllmsim, or vllm on a GPU runner).
	Program string
	Env     []string // every container's environment (simulated GPU, profile)
	GPU     nodeagent.GPU
	// Without lists control-plane components not started (tests).
	Without []string
}

// Cluster is a running local cluster.
type Cluster struct {
	CP      *controlplane.ControlPlane
	IP      string // the node's (and its Pods') address
	Agent   *nodeagent.Agent
	Clients *kube.Clients
}

// Start starts the control plane (DRAConsumableCapacity on) and the node,
// and returns once the node is schedulable. On error nothing is left running.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.BinDir, Dir: filepath.Join(o.Dir, "control-plane"), LogDir: o.LogDir,
		FeatureGates: []string{"DRAConsumableCapacity=true"}, Without: o.Without})
	if err != nil {
		return nil, err
	}
	c := &Cluster{CP: cp}
	if c.IP, err = hostIP(); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	if c.Clients, err = kube.Connect(cp.Kubeconfig); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	c.Agent, err = nodeagent.Start(ctx, nodeagent.Options{Node: Node, IP: c.IP, Driver: Driver, GPUs: []nodeagent.GPU{o.GPU}, Clients: c.Clients,
		Programs: map[string]string{"vllm": o.Program}, Env: o.Env, Dir: filepath.Join(o.Dir, "node"), LogDir: o.LogDir})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("local node: %w", err), cp.Alive(), cp.Stop())
	}
	return c, nil
}

// PhaseEnv is the Kubernetes phase's environment on this cluster: its
// clients, the node's in-place restart, the DeviceClass to create for the
// local driver and a free host port per Pod.
func (c *Cluster) PhaseEnv(cfg config.Config, src gpu.Source, logf func(string, ...any)) kubephase.Env {
	cfg.Kubernetes.HostNetwork = true // Pods are host processes: the node's network
	return kubephase.Env{Cfg: cfg, Clients: c.Clients, Node: c.Agent, Memory: kubephase.MemoryFrom(src), Driver: Driver,
		FreePort: func() (int, error) { return server.FreePort(c.IP) }, HostIP: c.IP, Logf: logf}
}

// hostIP is the host's first non-loopback IPv4 address: the node's. A
// Pod on the host network has the node's IP, and an EndpointSlice refuses
// loopback addresses.
func hostIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("local node: its address: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("local node: the host has no non-loopback IPv4 address, and EndpointSlices refuse 127.0.0.0/8: the Kubernetes phase needs a network interface up")
}

// Describe says what ran, for the report.
func (c *Cluster) Describe() string {
	return fmt.Sprintf("local control plane on 127.0.0.1 (etcd 3.6, kube-apiserver, kube-scheduler, kube-controller-manager v1.34.3 built from source, DRAConsumableCapacity on; ready in %.1f s), one node %s run by wakebench's node agent (Pods' containers as host processes, GPU published under DRA driver %s)",
		c.CP.Started.Seconds(), Node, Driver)
}

// Stop stops the node (every container) and the control plane.
func (c *Cluster) Stop() error {
	var errs []error
	if c.Agent != nil {
		errs = append(errs, c.Agent.Stop())
	}
	return errors.Join(append(errs, c.CP.Stop())...)
}

// NodeGPU is the node's GPU as the run's memory source knows it: its
// UUID (a made-up one for the simulated device), NVML index (0 for the
// simulated device), product and memory.
func NodeGPU(src gpu.Source) (nodeagent.GPU, error) {
	fs, ok := src.(gpu.FactSource)
	if !ok {
		return nodeagent.GPU{}, errors.New("local cluster: the node's GPU needs a memory source that knows the device (memory: sim or nvml, not none)")
	}
	f := fs.Facts()
	g := nodeagent.GPU{Name: "gpu-0", UUID: f.UUID, Product: f.Name, MemoryBytes: f.TotalBytes}
	if ix, ok := src.(interface{ Index() int }); ok { // NVML's index, PCI bus order
		g.Index = ix.Index()
	}
	if f.Simulated && g.UUID == "" {
		g.UUID = "GPU-wakebench-simulated-0"
	}
	return g, nil
}
