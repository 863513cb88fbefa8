package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// run starts the container, probes it, restarts it when it exits, and
// reports its status, until the Pod is stopped.
func (p *pod) run(ctx context.Context) {
	defer close(p.done)
	p.status(ctx)
	env, err := p.devices(ctx)
	if err == nil {
		var id []string
		id, err = p.identity(ctx)
		env = append(env, id...)
	}
	if err != nil {
		p.mu.Lock()
		p.waiting = &corev1.ContainerStateWaiting{Reason: "DeviceClaimError", Message: err.Error()}
		p.mu.Unlock()
		p.status(ctx)
		p.a.fail(err)
		return
	}
	for attempt := 0; ; attempt++ {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		if attempt > 1 { // the kubelet restarts at once, then backs off
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Second):
			}
		}
		srv, err := p.start(env)
		if err != nil {
			p.mu.Lock()
			p.waiting = &corev1.ContainerStateWaiting{Reason: "RunContainerError", Message: err.Error()}
			p.mu.Unlock()
			p.status(ctx)
			p.a.fail(err)
			return
		}
		p.status(ctx)
		p.probe(ctx, srv)
		// The container exited (or the Pod is stopping). What its main
		// process left running ends with it, as a runtime's cgroup
		// teardown does, and the watchdog forgets it.
		_ = srv.Stop(0)
		p.mu.Lock()
		term := &corev1.ContainerStateTerminated{ExitCode: exitCode(srv.ExitErr()), Reason: "Error", StartedAt: p.started, FinishedAt: metav1.Now()}
		switch {
		case p.killReason != "":
			term.Reason, p.killReason = p.killReason, ""
		case term.ExitCode == 0:
			term.Reason = "Completed"
		}
		if p.evicted != "" {
			term.Message = p.evicted
		} else if term.ExitCode != 0 && p.obj.Spec.Containers[0].TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			term.Message = logTail(p.a.LogPath(p.obj.Namespace, p.obj.Name, p.obj.Spec.Containers[0].Name))
		}
		p.srv, p.ready, p.last = nil, false, term
		p.final = p.evicted != "" || !restarts(p.obj.Spec.RestartPolicy, term.ExitCode)
		if !p.stopped && !p.final {
			p.restarts++
		}
		stopped, final := p.stopped, p.final
		p.mu.Unlock()
		if !stopped {
			p.status(ctx)
		}
		if final {
			return // run to completion: the Pod is Succeeded or Failed for good
		}
	}
}

// restarts reports whether the kubelet starts a container again that
// exited with code under policy: Always (the default) always, OnFailure
// unless it succeeded, Never never.
func restarts(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

func exitCode(err error) int32 {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if c := ee.ExitCode(); c >= 0 {
			return int32(c)
		}
		return 137
	}
	return 0
}

// devices resolves the Pod's ResourceClaims to the GPUs they were
// allocated on this node, as the environment that makes them the
// container's devices. A claim that is not allocated, or not reserved for
// this Pod, is an error naming it (the kubelet refuses such a Pod too).
func (p *pod) devices(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	var ids []string
	for _, rc := range obj.Spec.ResourceClaims {
		name := ""
		if rc.ResourceClaimName != nil {
			name = *rc.ResourceClaimName
		}
		for _, st := range obj.Status.ResourceClaimStatuses {
			if st.Name == rc.Name && st.ResourceClaimName != nil {
				name = *st.ResourceClaimName
			}
		}
		if name == "" {
			return nil, fmt.Errorf("pod %s: resource claim %q has no ResourceClaim yet", kube.Name(obj), rc.Name)
		}
		claim, err := p.a.c.Resource.ResourceClaims(obj.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s: %w", kube.Name(obj), name, err)
		}
		if claim.Status.Allocation == nil {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s is not allocated", kube.Name(obj), name)
		}
		if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == obj.UID }) {
			return nil, fmt.Errorf("pod %s: ResourceClaim %s is not reserved for it", kube.Name(obj), name)
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != p.a.o.Driver || r.Pool != p.a.o.Node {
				continue
			}
			i := slices.IndexFunc(p.a.o.GPUs, func(g GPU) bool { return g.Name == r.Device })
			if i < 0 {
				return nil, fmt.Errorf("pod %s: ResourceClaim %s names device %s, which node %s does not publish", kube.Name(obj), name, r.Device, p.a.o.Node)
			}
			if id := strconv.Itoa(p.a.o.GPUs[i].Index); !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Indices in PCI bus order, never GPU-… UUIDs: vLLM before 0.24 reads
	// each CUDA_VISIBLE_DEVICES entry with int() and a UUID crashes it at
	// start (vllm/platforms/interface.py, device_id_to_physical_device_id;
	// vllm-project/vllm#13815, #20939), as backend.CUDAEnv says for servers
	// the harness starts itself.
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}, nil
}

// start runs the Pod's container as a host process.
func (p *pod) start(devEnv []string) (*server.Server, error) {
	p.mu.Lock()
	obj := p.obj.DeepCopy()
	p.mu.Unlock()
	if len(obj.Spec.Containers) != 1 {
		return nil, fmt.Errorf("pod %s: the node agent runs Pods of one container, not %d", kube.Name(obj), len(obj.Spec.Containers))
	}
	c := obj.Spec.Containers[0]
	argv := append(slices.Clone(c.Command), c.Args...)
	if len(argv) == 0 {
		return nil, fmt.Errorf("pod %s: container %s has no command (the node agent has no images to take one from)", kube.Name(obj), c.Name)
	}
	prog, ok := p.a.o.Programs[argv[0]]
	if !ok {
		var err error
		if prog, err = exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("pod %s: container %s: %w", kube.Name(obj), c.Name, err)
		}
	}
	dir := p.a.podDir(obj)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	env := slices.Clone(p.a.o.Env)
	// Caches live with the Pod (an emptyDir): empty at the Pod's first
	// start, kept over its container's restarts.
	env = append(env, "VLLM_CACHE_ROOT="+filepath.Join(dir, "vllm"), "TORCHINDUCTOR_CACHE_DIR="+filepath.Join(dir, "inductor"),
		"TRITON_CACHE_DIR="+filepath.Join(dir, "triton"), "CUDA_CACHE_PATH="+filepath.Join(dir, "cuda"))
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = p.a.fieldRef(obj, e.ValueFrom); err != nil {
				return nil, fmt.Errorf("pod %s: container %s: env %s: %w", kube.Name(obj), c.Name, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+v)
	}
	env = append(env, devEnv...)
	srv, err := server.Start(server.Spec{Label: obj.Name, Path: prog, Args: argv[1:], Env: env, LogPath: p.a.LogPath(obj.Namespace, obj.Name, c.Name), Watchdog: p.a.watchdog})
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", kube.Name(obj), err)
	}
	p.mu.Lock()
	p.srv, p.started, p.ready, p.waiting = srv, metav1.Now(), false, nil
	p.mu.Unlock()
	return srv, nil
}

// LogPath is where container c of Pod ns/name logs on this node.
func (a *Agent) LogPath(ns, name, c string) string {
	return filepath.Join(a.o.LogDir, ns+"_"+name+"_"+c+".log")
}

// probe runs the container's readiness probe until the process exits,
// and reports readiness changes and readiness-gate changes as they come.
func (p *pod) probe(ctx context.Context, srv *server.Server) {
	p.mu.Lock()
	rp := p.obj.Spec.Containers[0].ReadinessProbe
	p.mu.Unlock()
	period := time.Second
	if rp != nil && rp.PeriodSeconds > 0 {
		period = time.Duration(rp.PeriodSeconds) * time.Second
	}
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		p.mu.Lock()
		obj := p.obj // replaced, never changed in place
		p.mu.Unlock()
		ready := rp == nil || httpReady(ctx, hc, obj, rp)
		p.mu.Lock()
		change := ready != p.ready
		p.ready = ready
		p.mu.Unlock()
		if change {
			p.status(ctx)
		}
		select {
		case <-ctx.Done():
			_ = srv.Stop(0)
			return
		case <-srv.Done():
			return
		case <-p.changed:
			p.status(ctx) // a readiness gate may have changed: Ready follows at once
		case <-t.C:
		}
	}
}

func httpReady(ctx context.Context, hc *http.Client, obj *corev1.Pod, rp *corev1.Probe) bool {
	if rp.HTTPGet == nil {
		return true
	}
	port := rp.HTTPGet.Port.IntValue()
	if rp.HTTPGet.Port.Type == intstr.String {
		for _, cp := range obj.Spec.Containers[0].Ports {
			if cp.Name == rp.HTTPGet.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(obj.Status.PodIP, strconv.Itoa(port))+rp.HTTPGet.Path, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}

// fieldRef resolves an env var's valueFrom as the kubelet's downward API
// does, for the fields a Job's Pod needs: metadata.name, .namespace, .uid,
// a label or annotation (metadata.annotations['batch.kubernetes.io/job-completion-index']
// is JOB_COMPLETION_INDEX, which the Job controller adds to an Indexed
// Job's containers), spec.nodeName, spec.serviceAccountName and the node's
// (the Pod's) IP. Anything else (resourceFieldRef, configMapKeyRef,
// secretKeyRef) is an error naming it.
func (a *Agent) fieldRef(obj *corev1.Pod, src *corev1.EnvVarSource) (string, error) {
	if src.FieldRef == nil {
		return "", errors.New("valueFrom: only fieldRef is supported by the node agent")
	}
	path := src.FieldRef.FieldPath
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return obj.Annotations[k], nil
	}
	if k, ok := subscript(path, "metadata.labels"); ok {
		return obj.Labels[k], nil
	}
	switch path {
	case "metadata.name":
		return obj.Name, nil
	case "metadata.namespace":
		return obj.Namespace, nil
	case "metadata.uid":
		return string(obj.UID), nil
	case "spec.nodeName":
		return obj.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return obj.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP":
		return a.o.IP, nil
	}
	return "", fmt.Errorf("valueFrom.fieldRef %q is not supported by the node agent", path)
}

// subscript is k of path "field['k']" (the downward API's syntax for one
// label or annotation).
func subscript(path, field string) (string, bool) {
	rest, ok := strings.CutPrefix(path, field+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// logTail is the end of a failed container's log, as the kubelet makes
// its termination message under FallbackToLogsOnError: at most the last
// 80 lines and 2048 bytes (kubernetes pkg/kubelet/container/runtime.go:
// MaxContainerTerminationMessageLogLines, MaxContainerTerminationMessageLogLength;
// read by kuberuntime's readLastStringFromContainerLogs). A log that
// cannot be read gives "".
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	const maxBytes, maxLines = 2048, 80
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}
