package wakebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/fleetjob"
	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/harness"
	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/kubelocal"
)

// fleetNode is the test binary as a fleet Pod's container: the suite
// with the node's config (fleetjob.EnvConfig) into a fresh out dir, then
// its report.json, bench.txt and samples.csv uploaded as the node's
// result ConfigMap. Its exit code is the suite's (at least 3 when the
// upload failed: the coordinator then sees a Pod that failed without a
// result).
func fleetNode(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wakebench-fleet-node-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "wakebench fleet node: %v\n", err)
		return 3
	}
	defer os.RemoveAll(dir)
	cfgPath, out := filepath.Join(dir, "config.json"), filepath.Join(dir, "out")
	if err := os.WriteFile(cfgPath, []byte(takeNodeConfig()), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "wakebench fleet node: %v\n", err)
		return 3
	}
	os.Setenv(config.EnvFile, cfgPath)
	os.Setenv(config.EnvName("out_dir"), out)
	code := run(m)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kube.Connect("") // in a cluster: the Pod's ServiceAccount
	if err == nil {
		err = fleetjob.Upload(ctx, c, os.Getenv, out, code)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wakebench fleet node: %v\n", err)
		return max(code, 3)
	}
	fmt.Printf("wakebench fleet node %s: result uploaded (go test exit %d)\n", os.Getenv(fleetjob.EnvNode), code)
	return code
}

// takeNodeConfig is the node's config from the Pod's environment, taken
// out of it: the processes this one starts (a variant run's children)
// are runs on the node, not fleet nodes of their own, which would each
// run in a folder of their own and upload their result in the node's
// place.
func takeNodeConfig() string {
	c := os.Getenv(fleetjob.EnvConfig)
	os.Unsetenv(fleetjob.EnvConfig)
	return c
}

// TestFleet is the fleet run: the suite on every selected GPU node as one
// Indexed Job, the nodes' results back through the API server, one fleet
// report (out_dir/fleet: fleet.json, fleet.md, bench.txt). Off unless
// fleet.control_plane is set: make fleet runs it on a local control plane
// with several simulated GPU kinds, one node degraded and two with faults.
func TestFleet(t *testing.T) {
	h, ctx := begin(t, "fleet")
	cfg := h.Config()
	if !cfg.Fleet.On() {
		t.Skip("fleet run off (fleet.control_plane unset): run make fleet, or set fleet in the config (docs/fleet.md)")
	}
	skipIfStopped(t)
	fc := cfg.Fleet.WithDefaults()
	nodeCfg, err := nodeConfig()
	require.NoError(t, err)
	o := fleetjob.Options{
		// Unique per run (a second in base 36 and a random suffix): the
		// run's objects, node label and taint carry it.
		Spec: fleetjob.Spec{Name: fmt.Sprintf("wakebench-fleet-%s-%04x", strconv.FormatInt(time.Now().Unix(), 36), rand.IntN(1<<16)), Namespace: fc.Namespace, Image: fc.Image,
			Command: []string{"wakebench"}, Args: []string{"-test.run", fc.Run, "-test.v", "-test.count=1", "-test.timeout", fmt.Sprintf("%.0fs", fc.TimeoutS)},
			Config: nodeCfg, Parallelism: fc.Parallelism, DeadlineS: int64(fc.DeadlineS), ServiceAccount: fc.ServiceAccount},
		Select:          fleetjob.Selection{Nodes: fc.Nodes, NodeSelector: fc.NodeSelector, Driver: fc.Driver},
		ScheduleTimeout: time.Duration(fc.ScheduleTimeoutS * float64(time.Second)),
		NodeLost:        time.Duration(fc.NodeLostS * float64(time.Second)),
		Logf:            progress(t),
	}
	if fc.DeviceClass != "none" {
		o.Spec.DeviceClass = fc.DeviceClass
	}
	if fc.Driver == "none" {
		o.Select.Driver = ""
	}
	for name, q := range fc.Resources { // validated by config
		if o.Spec.Resources == nil {
			o.Spec.Resources = corev1.ResourceList{}
		}
		o.Spec.Resources[corev1.ResourceName(name)] = resource.MustParse(q)
	}
	for _, tl := range fc.Tolerations {
		o.Spec.Tolerations = append(o.Spec.Tolerations, corev1.Toleration{Key: tl.Key, Operator: corev1.TolerationOperator(tl.Operator), Value: tl.Value, Effect: corev1.TaintEffect(tl.Effect)})
	}
	faults := map[string]string{}
	var admin *kube.Clients // the local control plane's administrator (the checks below)
	switch fc.ControlPlane {
	case "local":
		fl := startLocalFleet(t, ctx, fc, o.Spec.DeviceClass)
		admin = fl.Clients
		// The coordinator runs with what deploy/rbac.yaml grants it, no
		// more: the file a real cluster applies is proved sufficient.
		require.Equal(t, "wakebench-fleet", fc.Namespace, "the local fleet applies deploy/rbac.yaml, written for namespace wakebench-fleet")
		rbac, err := os.ReadFile(filepath.Join("deploy", "rbac.yaml"))
		require.NoError(t, err)
		require.NoError(t, kubelocal.ApplyRBAC(ctx, fl.Clients, rbac))
		o.Clients, err = fl.ClientsAs(ctx, fc.Namespace, "wakebench-coordinator")
		require.NoError(t, err)
		for _, n := range fc.LocalNodes {
			if n.Fault != "" {
				faults[n.Name] = n.Fault
			}
		}
		injectFaults(t, ctx, fl, o.Spec, faults)
	case "kubeconfig":
		o.Clients, err = kube.Connect(fc.Kubeconfig)
		require.NoError(t, err)
	}
	start := time.Now()
	results, runErr := fleetjob.Run(ctx, o)
	t.Logf("fleet: %d nodes in %.1f s", len(results), time.Since(start).Seconds())
	// The report is written whatever ended the run (a deadline, a
	// cleanup that failed): every node's outcome taken is kept.
	f, err := fleetreport.Build(results, fleetreport.Options{})
	require.NoError(t, err)
	dir := filepath.Join(cfg.OutDir, "fleet")
	require.NoError(t, fleetreport.Write(dir, f))
	require.NoError(t, fleetreport.WriteNodes(dir, results), "each node's own outputs under fleet/nodes/")
	t.Logf("fleet report: %s (flagged: %v)", dir, f.Flagged())
	require.NoError(t, runErr)

	if fc.ControlPlane != "local" {
		return
	}
	// The local fleet: every node without a fault passes; each fault is
	// its node's FAIL with its reason; the outlier rule names the
	// degraded node (a profile whose name says so) and no other.
	want := map[string]string{"evict": "Pod evicted", "oom": "OOM-killed", "lost": "node lost mid-run", "unschedulable": "no Pod scheduled on it"}
	var degraded []string
	for _, n := range fc.LocalNodes {
		i := slices.IndexFunc(results, func(r fleetreport.NodeResult) bool { return r.Node == n.Name })
		require.GreaterOrEqual(t, i, 0, "node %s has a result", n.Name)
		r := results[i]
		if n.Fault != "" {
			assert.Equal(t, fleetreport.StatusFail, r.Status, "node %s (fault %s)", n.Name, n.Fault)
			assert.Contains(t, r.Reason, want[n.Fault], "node %s (fault %s)", n.Name, n.Fault)
			continue
		}
		assert.Equal(t, fleetreport.StatusPass, r.Status, "node %s: %s", n.Name, r.Reason)
		assert.NotEmpty(t, r.Report, "node %s: its report came back", n.Name)
		assert.NotEmpty(t, r.Bench, "node %s: its bench.txt came back", n.Name)
		assert.NotEmpty(t, r.Samples, "node %s: its samples came back", n.Name)
		assert.NotEmpty(t, r.GPU, "node %s: its GPU kind", n.Name)
		if isDegraded(n.Profile) {
			degraded = append(degraded, n.Name)
		}
	}
	var outliers []string
	for _, ol := range f.Outliers {
		if !slices.Contains(outliers, ol.Node) {
			outliers = append(outliers, ol.Node)
		}
		t.Logf("outlier: %s %s %s = %.3g (kind median %.3g): %s", ol.Node, ol.Model, ol.Metric, ol.Value, ol.KindMedian, ol.Rule)
	}
	slices.Sort(outliers)
	assert.Equal(t, degraded, outliers, "the fleet report names the degraded node and no other")
	for _, name := range []string{"fleet.json", "fleet.md", "bench.txt"} {
		assert.FileExists(t, filepath.Join(dir, name))
	}
	// Nothing left behind: the Job, its Pods, the results, the claims.
	sel := metav1.ListOptions{LabelSelector: fleetjob.LabelFleet + "=" + o.Spec.Name}
	pods, err := admin.Core.Pods(o.Spec.Namespace).List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, pods.Items, "Pods left")
	cms, err := admin.Core.ConfigMaps(o.Spec.Namespace).List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, cms.Items, "result ConfigMaps left")
	claims, err := admin.Resource.ResourceClaims(o.Spec.Namespace).List(ctx, sel)
	require.NoError(t, err)
	assert.Empty(t, claims.Items, "claims left")
	nodes, err := admin.Core.Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	taint := fleetjob.TestedTaint(o.Spec.Name)
	for _, n := range nodes.Items {
		assert.NotContains(t, n.Labels, fleetjob.NodeLabel(o.Spec.Name), "node %s still carries the run's label", n.Name)
		assert.False(t, slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.MatchTaint(&taint) }), "node %s still carries the run's taint", n.Name)
	}
	_, err = admin.Batch.Jobs(o.Spec.Namespace).Get(ctx, o.Spec.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Job deleted: %v", err)
	_, err = admin.Resource.ResourceClaimTemplates(o.Spec.Namespace).Get(ctx, o.Spec.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the claim template deleted: %v", err)
	_, err = admin.RBAC.Roles(o.Spec.Namespace).Get(ctx, o.Spec.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the run's Role deleted: %v", err)
	_, err = admin.RBAC.RoleBindings(o.Spec.Namespace).Get(ctx, o.Spec.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the run's RoleBinding deleted: %v", err)
	_, err = admin.Coordination.Leases(o.Spec.Namespace).Get(ctx, fleetjob.LockName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the fleet lock released: %v", err)
	_, err = admin.Core.ServiceAccounts(o.Spec.Namespace).Get(ctx, o.Spec.Name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the run's ServiceAccount deleted: %v", err)
}

// isDegraded: the local fleet's degraded profiles say so in their name.
func isDegraded(profile string) bool { return profile == "h100-pcie-gen3x8" }

// nodeConfig is the node runs' config: the config file without its fleet
// key (a node run is the same-host protocol) and without out_dir (each
// Pod writes its own).
func nodeConfig() ([]byte, error) {
	path := os.Getenv(config.EnvFile)
	if path == "" {
		return nil, errors.New("fleet: the node runs' config is the config file: set " + config.EnvFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("fleet: %s: %w", path, err)
	}
	delete(m, "fleet")
	delete(m, "out_dir")
	return json.Marshal(m)
}

// startLocalFleet starts the local control plane with the config's nodes,
// each its own simulated GPU kind, and the DeviceClass of their driver; the
// nodes' `wakebench` command is this test binary.
func startLocalFleet(t *testing.T, ctx context.Context, fc config.Fleet, deviceClass string) *kubelocal.Fleet {
	t.Helper()
	bin := fc.BinDir
	if bin == "" {
		bin = os.Getenv(harness.EnvK8sBin)
	}
	if bin == "" {
		t.Fatalf("fleet.control_plane local needs the control plane's binaries: run make fleet (or scripts/k8s-build.sh and set %s)", harness.EnvK8sBin)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	var nodes []kubelocal.FleetNode
	for _, n := range fc.LocalNodes {
		nodes = append(nodes, kubelocal.FleetNode{Name: n.Name, Profile: n.Profile})
	}
	cfg := suite.h.Config()
	start := time.Now()
	fl, err := kubelocal.StartFleet(ctx, kubelocal.FleetOptions{BinDir: bin, Dir: t.TempDir(), LogDir: filepath.Join(cfg.OutDir, "fleet-logs"),
		Programs: map[string]string{"wakebench": self}, Nodes: nodes})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fl.Stop()) })
	t.Logf("%s; nodes ready in %.1f s", fl.Describe(), time.Since(start).Seconds())
	if deviceClass != "" {
		_, err = fl.Clients.Resource.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: deviceClass},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: strconv.Quote(kubelocal.Driver) + " == device.driver"}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return fl
}

// injectFaults makes each faulty node's fault happen: unschedulable at
// once (a taint the Job does not tolerate), the others once the node's
// Pod runs (evicted, OOM-killed, or the node's agent stopped: lost).
func injectFaults(t *testing.T, ctx context.Context, fl *kubelocal.Fleet, s fleetjob.Spec, faults map[string]string) {
	t.Helper()
	for node, fault := range faults {
		if fault != "unschedulable" {
			continue
		}
		n, err := fl.Clients.Core.Nodes().Get(ctx, node, metav1.GetOptions{})
		require.NoError(t, err)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "wakebench.dev/broken", Effect: corev1.TaintEffectNoSchedule})
		_, err = fl.Clients.Core.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		injected := map[string]bool{}
		for fctx.Err() == nil {
			pods, err := fl.Clients.Core.Pods(s.Namespace).List(fctx, metav1.ListOptions{LabelSelector: fleetjob.LabelFleet + "=" + s.Name})
			if err == nil {
				for _, p := range pods.Items {
					fault := faults[p.Spec.NodeName]
					if injected[p.Spec.NodeName] || fault == "" || fault == "unschedulable" || p.Status.Phase != corev1.PodRunning {
						continue
					}
					injected[p.Spec.NodeName] = true
					a := fl.Agent(p.Spec.NodeName)
					var err error
					switch fault {
					case "evict":
						err = a.Evict(p.Namespace, p.Name, "The node was low on resource: memory.")
					case "oom":
						err = a.OOMKill(p.Namespace, p.Name)
					case "lost":
						err = a.Stop()
					}
					t.Logf("fault %s injected on node %s (Pod %s): %v", fault, p.Spec.NodeName, p.Name, err)
				}
			}
			select {
			case <-fctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
}
