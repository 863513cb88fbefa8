package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wakebench/wakebench/internal/hostload"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/kubelocal"
	"github.com/wakebench/wakebench/internal/kubephase"
	"github.com/wakebench/wakebench/internal/protocol"
	"github.com/wakebench/wakebench/internal/record"
)

// EnvK8sBin names the directory of the local control plane's binaries when
// kubernetes.bin_dir is not set (make k8s sets it).
const EnvK8sBin = "WAKEBENCH_K8S_BIN"

// Kubernetes runs the Kubernetes phase and judges it (kubernetes.*
// thresholds): on the local control plane and
// node agent (kubernetes.control_plane "local", stopped when it ends; the
// components' and containers' logs go to out_dir/kubernetes), or on the
// kubeconfig's cluster. What it measured is recorded whether it passes or
// not; a failure is recorded naming what to fix.
func (r *Run) Kubernetes(ctx context.Context, logf func(string, ...any)) (protocol.Outcome[record.Kubernetes], error) {
	k, err := r.kubernetes(ctx, logf)
	return protocol.Judged(k, err, func() []record.Check { return r.env.Record(kubephase.Phase, kubephase.Checks(r.cfg, k)...) })
}

// kubernetes is Kubernetes' run, without the checks.
func (r *Run) kubernetes(ctx context.Context, logf func(string, ...any)) (k record.Kubernetes, err error) {
	cfg := r.cfg
	r.rec.PhaseRan(kubephase.Phase)
	start, host := time.Now(), hostload.Window()
	defer func() {
		r.rec.Window(kubephase.Phase, start, time.Now(), time.Duration(cfg.Protocol.WindowPadS*float64(time.Second)), host())
		if k.Cluster != "" { // a cluster was reached: the phase ran, however far
			r.rec.Writers().Kubernetes.Set(k)
		}
		if err != nil {
			err = r.env.Fail(kubephase.Phase, "", "run", err)
		}
	}()
	var env kubephase.Env
	switch cfg.Kubernetes.ControlPlane {
	case "local":
		bin := cfg.Kubernetes.BinDir
		if bin == "" {
			bin = os.Getenv(EnvK8sBin)
		}
		if bin == "" {
			return k, errors.New("kubernetes.control_plane \"local\" needs the control plane's binaries: run make k8s, or scripts/k8s-build.sh and set kubernetes.bin_dir (or " + EnvK8sBin + ") to the directory it prints")
		}
		g, err := kubelocal.NodeGPU(r.be.Source)
		if err != nil {
			return k, err
		}
		logDir, err := kubeLogDir(cfg.OutDir)
		if err != nil {
			return k, err
		}
		cl, err := kubelocal.Start(ctx, kubelocal.Options{BinDir: bin, Dir: filepath.Join(r.tmp, "kubernetes"),
			LogDir: logDir, Program: r.be.Command, Env: r.be.NodeEnv(), GPU: g})
		if err != nil {
			return k, err
		}
		defer func() {
			if serr := cl.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stopping the local cluster: %w", serr))
			}
		}()
		env = cl.PhaseEnv(cfg, r.be.Source, logf)
		k.Cluster, k.Node = cl.Describe(), kubelocal.Node
		if r.be.Setup.Simulated != nil {
			k.Simulated = "simulated node: the control plane is real Kubernetes v1.34.3, the node is wakebench's node agent running vllmsim on a simulated GPU as host processes; Pod starts carry no image pull, no container runtime and no real model load"
		}
	case "kubeconfig":
		c, err := kube.Connect(cfg.Kubernetes.Kubeconfig)
		if err != nil {
			return k, err
		}
		env = kubephase.Env{Cfg: cfg, Clients: c, Memory: kubephase.MemoryFrom(r.be.Source), Logf: logf}
		k.Cluster = "the kubeconfig's cluster at " + c.Host
	default:
		return k, fmt.Errorf("kubernetes phase off (kubernetes.control_plane %q)", cfg.Kubernetes.ControlPlane)
	}
	got, err := kubephase.Run(ctx, env)
	got.Cluster, got.Simulated, got.Node = k.Cluster, k.Simulated, k.Node
	if got.ServerVersion != "" {
		r.rec.SetServerVersion(got.ServerVersion, r.be.CUDA)
	}
	return got, err
}
