package fleetjob

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube/kubefake"
	"github.com/wakebench/wakebench/internal/testmain"
	"github.com/wakebench/wakebench/internal/variants"
)

func spec() Spec {
	return Spec{Name: "fleet-1", Namespace: "wb", Image: "img", Command: []string{"wakebench"}, Args: []string{"-test.v"},
		Config: []byte(`{"x":1}`), Nodes: []string{"a", "b", "c"}, Parallelism: 2, DeadlineS: 600, DeviceClass: "gpu.example.com",
		Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}
}

func TestJobIsIndexedOnePodPerSelectedNodeBoundedInTime(t *testing.T) {
	j := Job(spec())
	assert.Equal(t, batchv1.IndexedCompletion, *j.Spec.CompletionMode)
	assert.EqualValues(t, 3, *j.Spec.Completions, "one completion per selected node")
	assert.EqualValues(t, 2, *j.Spec.Parallelism)
	assert.EqualValues(t, 0, *j.Spec.BackoffLimitPerIndex, "a node's failure is not retried elsewhere")
	assert.EqualValues(t, 600, *j.Spec.ActiveDeadlineSeconds)
	ps := j.Spec.Template.Spec
	assert.Equal(t, corev1.RestartPolicyNever, ps.RestartPolicy)
	assert.Equal(t, "fleet-1", ps.ServiceAccountName, "the run's own ServiceAccount")
	assert.Equal(t, spec().Tolerations, ps.Tolerations)
	terms := ps.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 1)
	assert.Equal(t, []corev1.NodeSelectorRequirement{{Key: "fleet.wakebench.dev/fleet-1", Operator: corev1.NodeSelectorOpIn, Values: []string{"selected"}}},
		terms[0].MatchExpressions, "only the selected nodes")
	anti := ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
	assert.Equal(t, corev1.LabelHostname, anti.TopologyKey)
	assert.Equal(t, "fleet-1", anti.LabelSelector.MatchLabels[LabelFleet])
	assert.Equal(t, "fleet-1", j.Spec.Template.Labels[LabelFleet], "the anti-affinity selects the Job's own Pods")
	assert.Equal(t, "fleet-1", *ps.ResourceClaims[0].ResourceClaimTemplateName)
	c := ps.Containers[0]
	assert.Equal(t, []string{"wakebench"}, c.Command)
	assert.Equal(t, []corev1.ResourceClaim{{Name: "gpu"}}, c.Resources.Claims, "the container gets the node's GPU")
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	assert.Equal(t, `{"x":1}`, env[EnvConfig].Value)
	assert.Equal(t, "spec.nodeName", env[EnvNode].ValueFrom.FieldRef.FieldPath)
	assert.Equal(t, "metadata.labels['batch.kubernetes.io/controller-uid']", env[EnvJobUID].ValueFrom.FieldRef.FieldPath)

	s := spec()
	s.Parallelism = 0
	assert.EqualValues(t, 3, *Job(s).Spec.Parallelism, "0: every node at once")
	ct := ClaimTemplate(spec())
	assert.Equal(t, "gpu.example.com", ct.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName)
	assert.Equal(t, "fleet-1", ct.Spec.Labels[LabelFleet], "its claims carry the label cleanup deletes by")
	_, role, rb := RBAC("wb", "fleet-1")
	assert.Equal(t, []string{"configmaps"}, role.Rules[0].Resources)
	assert.Equal(t, []string{"create", "get", "update"}, role.Rules[0].Verbs)
	assert.Equal(t, "fleet-1", rb.Subjects[0].Name)
	assert.Equal(t, "fleet-1", rb.RoleRef.Name)

	s = spec()
	s.ServiceAccount, s.DeviceClass = "wakebench-fleet", ""
	s.Resources = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	ps = Job(s).Spec.Template.Spec
	assert.Equal(t, "wakebench-fleet", ps.ServiceAccountName, "deploy/rbac.yaml's, when named")
	assert.Empty(t, ps.ResourceClaims, "no DRA claim")
	assert.Equal(t, "1", ps.Containers[0].Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).String(), "a device plugin's GPU")
}

func csv(lines int) []byte {
	var b bytes.Buffer
	b.WriteString("t_s,gpu,used_bytes\n")
	r := rand.New(rand.NewPCG(1, 2))
	for i := range lines {
		fmt.Fprintf(&b, "%d.%03d,0,%d\n", i, r.IntN(1000), r.Int64()) // incompressible enough
	}
	return b.Bytes()
}

func TestResultRoundTripsThroughAConfigMap(t *testing.T) {
	r := Result{Node: "n1", Pod: "p", ExitCode: 1, Report: []byte(`{"status":"FAIL"}`), Bench: []byte("BenchmarkX 1 2 s/op\n"), Samples: csv(100)}
	cm, err := Encode(r, "fleet-1", "uid-1", "3", "wb", 0)
	require.NoError(t, err)
	assert.Equal(t, "fleet-1-result-3", cm.Name)
	assert.Equal(t, "uid-1", string(cm.OwnerReferences[0].UID), "owned by the Job: outlives the Pod, goes with the Job")
	assert.Equal(t, "n1", cm.Labels[LabelNode])
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.Equal(t, r.Report, got.Report)
	assert.Equal(t, r.Bench, got.Bench)
	assert.Equal(t, r.Samples, got.Samples)
	assert.False(t, got.Truncated)
	assert.Equal(t, 1, got.ExitCode)
}

func TestResultCutsSamplesAtALineToFitAndSaysSo(t *testing.T) {
	testmain.Long(t)
	samples := csv(200000) // ~6 MB: several MiB gzipped
	r := Result{Node: "n1", Report: []byte(`{}`), Bench: []byte("b\n"), Samples: samples}
	cm, err := Encode(r, "fleet-1", "", "0", "wb", 0)
	require.NoError(t, err)
	size := 0
	for _, v := range cm.Data {
		size += len(v)
	}
	for _, v := range cm.BinaryData {
		size += len(v)
	}
	assert.LessOrEqual(t, size, ConfigMapMax, "within the API server's bound")
	assert.Greater(t, size, DefaultMaxBytes*9/10, "the bound is used, not wasted")
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.True(t, got.Truncated)
	assert.Equal(t, len(samples), got.SamplesBytes)
	assert.True(t, bytes.HasPrefix(samples, got.Samples), "a prefix of the samples")
	assert.True(t, bytes.HasSuffix(got.Samples, []byte("\n")), "cut at a line")
	assert.True(t, strings.HasPrefix(string(got.Samples), "t_s,gpu,used_bytes\n"), "the header kept")

	_, err = Encode(Result{Node: "n1", Report: csv(200000)}, "fleet-1", "", "0", "wb", 0)
	assert.ErrorContains(t, err, "over the result's bound", "a report that cannot fit is an error, not cut")
}

func TestUploadCreatesThenReplacesTheResult(t *testing.T) {
	c, _ := kubefake.New()
	dir := t.TempDir()
	env := map[string]string{EnvNamespace: "wb", EnvJob: "fleet-1", EnvNode: "n1", EnvPod: "fleet-1-0-x", EnvJobUID: "uid", "JOB_COMPLETION_INDEX": "0"}
	require.NoError(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 0))
	require.NoError(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 2), "a second try of the index replaces it")
	cm, err := c.Core.ConfigMaps("wb").Get(context.Background(), "fleet-1-result-0", metav1.GetOptions{})
	require.NoError(t, err)
	got, err := Decode(cm)
	require.NoError(t, err)
	assert.Equal(t, 2, got.ExitCode)
	assert.Empty(t, got.Report, "no report.json: sent empty")
	delete(env, "JOB_COMPLETION_INDEX")
	assert.ErrorContains(t, Upload(context.Background(), c, func(k string) string { return env[k] }, dir, 0), "not a Pod of an Indexed Job")
}

// A node's variant run sends its comparison.json with one run of the
// reference variant: its report.json, bench.txt and samples.csv, so that
// the node's figures and pooled samples are one run's of one build. The
// first reference run that passed is the one; without one, the first that
// wrote a report.
func TestUploadOfAVariantRun(t *testing.T) {
	c, _ := kubefake.New()
	out := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	}
	// Block 1's reference run failed; block 2's passed; block 3's was stopped before its report.
	comparison := `{"status":"FAIL","reference":"v0.31","variants":["v0.31","v0.33"],"runs":[` +
		`{"block":3,"variant":"v0.31","status":"NOT RUN"},{"block":2,"variant":"v0.33","status":"PASS"},{"block":2,"variant":"v0.31","status":"PASS"},` +
		`{"block":1,"variant":"v0.33","status":"PASS"},{"block":1,"variant":"v0.31","status":"FAIL"}]}`
	write(filepath.Join(out, variants.ComparisonFile), comparison)
	write(filepath.Join(out, "bench.txt"), "variant: v0.31\nBenchmarkX 1 1 s\n\nvariant: v0.33\nBenchmarkX 1 9 s\n")
	for v, blocks := range map[string][]int{"v0.31": {1, 2}, "v0.33": {1, 2}} {
		for _, b := range blocks {
			dir := variants.RunDir(out, v, b)
			write(filepath.Join(dir, "report.json"), fmt.Sprintf(`{"runtime":"%s block %d"}`, v, b))
			write(filepath.Join(dir, "bench.txt"), fmt.Sprintf("BenchmarkX 1 %d s\n", b))
			write(filepath.Join(dir, "samples.csv"), fmt.Sprintf("t_s,gpu,used_bytes\n%d,0,1\n", b))
		}
	}
	env := map[string]string{EnvNamespace: "wb", EnvJob: "fleet-1", EnvNode: "n1", EnvJobUID: "uid", "JOB_COMPLETION_INDEX": "0"}
	upload := func(code int) Result {
		t.Helper()
		require.NoError(t, Upload(context.Background(), c, func(k string) string { return env[k] }, out, code))
		cm, err := c.Core.ConfigMaps("wb").Get(context.Background(), "fleet-1-result-0", metav1.GetOptions{})
		require.NoError(t, err)
		got, err := Decode(cm)
		require.NoError(t, err)
		return got
	}
	got := upload(1)
	assert.Equal(t, comparison, string(got.Comparison))
	assert.Equal(t, `{"runtime":"v0.31 block 2"}`, string(got.Report), "the reference's run that passed, not block 1's that failed nor another variant's")
	assert.Equal(t, "BenchmarkX 1 2 s\n", string(got.Bench), "that run's own samples: one build's, one run's")
	assert.Equal(t, "t_s,gpu,used_bytes\n2,0,1\n", string(got.Samples))

	// No reference run passed: the first that wrote a report.
	comparison = strings.Replace(comparison, `{"block":2,"variant":"v0.31","status":"PASS"}`, `{"block":2,"variant":"v0.31","status":"FAIL"}`, 1)
	write(filepath.Join(out, variants.ComparisonFile), comparison)
	assert.Equal(t, `{"runtime":"v0.31 block 1"}`, string(upload(1).Report))

	// None wrote a report: the comparison goes, nothing else (the node FAILs saying so).
	for _, b := range []int{1, 2} {
		require.NoError(t, os.RemoveAll(variants.RunDir(out, "v0.31", b)))
	}
	got = upload(1)
	assert.Empty(t, got.Report)
	assert.Empty(t, got.Bench)
	assert.Equal(t, comparison, string(got.Comparison))

	// A run of one build has no comparison key, and decodes without one.
	plain, err := Encode(Result{Node: "n1", Report: []byte(`{}`)}, "fleet-1", "", "1", "wb", 0)
	require.NoError(t, err)
	assert.NotContains(t, plain.BinaryData, keyCompare)
	back, err := Decode(plain)
	require.NoError(t, err)
	assert.Nil(t, back.Comparison)
}

func TestSelectNodesByDriverWithTheirGPUKind(t *testing.T) {
	slice := func(n, driver, product string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: n + "-" + driver}, Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &n,
			Devices: []resourcev1.Device{{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"productName": {StringValue: &product}}}}}}
	}
	node := func(n string, l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: l}}
	}
	c, _ := kubefake.New(node("g1", map[string]string{"pool": "x"}), node("g2", map[string]string{"pool": "y"}), node("cpu", nil),
		slice("g1", "gpu.example.com", "NVIDIA H100 80GB HBM3"), slice("g2", "gpu.example.com", "NVIDIA L20"), slice("cpu", "other", "x"))
	s, err := selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com"})
	require.NoError(t, err)
	assert.Equal(t, []string{"g1", "g2"}, s.nodes, "every node publishing the driver's device")
	assert.Equal(t, "NVIDIA H100 80GB HBM3", s.gpus["g1"])
	s, err = selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com", NodeSelector: map[string]string{"pool": "y"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"g2"}, s.nodes)
	s, err = selectNodes(context.Background(), c, Selection{Driver: "gpu.example.com", Nodes: []string{"g1", "cpu", "gone"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"g1"}, s.nodes)
	require.Len(t, s.notRun, 2)
	assert.Equal(t, "no such node (or it does not match the node selector)", s.notRun[0].Reason)
	assert.Equal(t, "publishes no device of DRA driver gpu.example.com", s.notRun[1].Reason)

	// driver none: no DRA filter; the kind from GPU feature discovery's label.
	c, _ = kubefake.New(node("g1", map[string]string{"pool": "x", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}), node("cpu", nil))
	s, err = selectNodes(context.Background(), c, Selection{NodeSelector: map[string]string{"pool": "x"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"g1"}, s.nodes)
	assert.Equal(t, "NVIDIA A100 SXM4 80GB", s.gpus["g1"])
}
