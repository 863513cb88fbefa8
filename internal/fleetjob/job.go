// Package fleetjob runs the suite on every selected GPU node of a cluster
// as one Kubernetes Indexed Job, and brings each node's results back
// through the API server (issue 26; docs/fleet.md).
//
// The coordinator (Run) selects the nodes (explicit names, a node
// selector, or every node publishing a device of the DRA driver), labels
// each selected node NodeLabel(job)=selected, applies the RBAC its Pods
// need (a ServiceAccount, Role on ConfigMaps and RoleBinding of the run's
// own, unless the config names an existing ServiceAccount), and creates
// one Indexed Job: completions = the selected nodes, at most parallelism
// at once, restartPolicy Never with backoffLimitPerIndex 0 (a node's
// failure is its own: the Job's other indexes go on, nothing is retried
// onto another node), a required node affinity on the run's label, a
// required podAntiAffinity on kubernetes.io/hostname among the Job's Pods
// (one Pod per node at a time), the GPU nodes' tolerations, a
// ResourceClaimTemplate on the DRA device class (the Pod gets that node's
// GPU) or extended resources (a device plugin's nvidia.com/gpu), and
// activeDeadlineSeconds (the run is bounded in time). The moment a Pod is
// bound to a node the coordinator taints that node (NoSchedule, the run's
// key), so no later index lands there: kube-scheduler alone cannot keep a
// finished node from a second index (it ignores finished Pods for
// anti-affinity). Each Pod
// runs the compiled test binary (`go test -c`) on its node: the same-host
// protocol, servers inside the Pod.
//
// Results come back as one ConfigMap per node (Upload, run by the Pod's
// test binary when its run ends): report.json, bench.txt and samples.csv,
// gzipped, bounded under a ConfigMap's 1 MiB (samples.csv cut at a line
// with a truncation flag when it does not fit), owned by the Job. Through
// the API server rather than Pod logs: logs go with the Pod (an evicted
// or garbage-collected Pod's log is gone, and the kubelet rotates logs at
// 10 MiB), a log is one text stream to be parsed back apart, and reading
// it needs pods/log on every node's kubelet; a ConfigMap survives its
// Pod, is typed (three files and their metadata), size-checked by the API
// server, and garbage-collected with the Job it is owned by. Rather than
// the Pod's network: the coordinator need not reach Pod IPs, and a Pod
// that has finished has nothing listening.
//
// The coordinator turns the ConfigMaps and the Pods' fates into one
// fleetreport.NodeResult per node: PASS, or FAIL / NOT RUN with the
// reason (never scheduled, evicted, OOM-killed, deleted, node lost
// mid-run, timed out), and deletes everything it created (Job, Pods,
// ConfigMaps, claims, RBAC, the node labels) also after a failure or an
// interrupt. It reads the Job, its Pods and the nodes' Leases through
// informers (one list, then a watch), and each result ConfigMap once, by
// name, when its Pod has ended: the API traffic grows with the changes,
// not with the nodes times the polls.
package fleetjob

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and names on everything the fleet run creates.
const (
	LabelApp   = "app.kubernetes.io/name" // = wakebench, as the Kubernetes phase's objects
	LabelFleet = "wakebench.dev/fleet"    // = the Job's name
	LabelNode  = "wakebench.dev/node"     // on a result ConfigMap: its node
	// ServiceAccount is the Pods' ServiceAccount deploy/rbac.yaml makes
	// (fleet.service_account, for a coordinator that may not create RBAC
	// objects); otherwise each run makes its own, named as its Job.
	ServiceAccount = "wakebench-fleet"
	claimName      = "gpu"
	container      = "wakebench"
)

// NodeSelected is NodeLabel(job)'s value on each node the run selected:
// the Job's node affinity requires it. It does not change while the run
// goes on: the kubelet checks a Pod's node affinity again when it admits
// the Pod (pkg/kubelet/lifecycle/predicate.go, generalFilter's
// AdmissionCheck), so a label changed under a bound Pod would fail it.
const NodeSelected = "selected"

// NodeLabel is the label key a run puts on each node it selected, and
// removes when it ends; TestedTaint's key is the same. Per run:
// concurrent runs in one cluster do not see each other's marks.
func NodeLabel(job string) string { return "fleet.wakebench.dev/" + job }

// TestedTaint is the taint a run puts on a node the moment one of its
// Pods is bound there, and removes when it ends: NoSchedule, so no later
// index lands there, while the Pod bound there runs (the kubelet's
// admission looks at NoExecute taints only: generalFilter, as above).
func TestedTaint(job string) corev1.Taint {
	return corev1.Taint{Key: NodeLabel(job), Value: "tested", Effect: corev1.TaintEffectNoSchedule}
}

// Environment of a fleet Pod's container (read by Upload and by the test
// binary's TestMain, which runs the suite with the node's config).
const (
	EnvConfig    = "WAKEBENCH_FLEET_NODE_CONFIG" // the node run's config file contents (JSON)
	EnvJob       = "WAKEBENCH_FLEET_JOB"         // the Job's name: the result ConfigMaps' prefix
	EnvJobUID    = "WAKEBENCH_FLEET_JOB_UID"     // the Job's UID: the result ConfigMap's owner
	EnvNode      = "WAKEBENCH_FLEET_NODE"        // spec.nodeName
	EnvNamespace = "WAKEBENCH_FLEET_NAMESPACE"
	EnvPod       = "WAKEBENCH_FLEET_POD"
	EnvMaxBytes  = "WAKEBENCH_FLEET_MAX_BYTES" // the result's size bound ("": DefaultMaxBytes)
)

// Spec is what the fleet's Job is built from.
type Spec struct {
	Name, Namespace string
	Image           string   // the vLLM image with the test binary (deploy/Dockerfile)
	Command         []string // ["wakebench"]: the test binary
	Args            []string // go test flags: -test.run, -test.v, -test.timeout
	Config          []byte   // the node run's config (EnvConfig)
	Nodes           []string // the selected nodes: one completion each
	Parallelism     int      // at most this many nodes at once (0: all)
	DeadlineS       int64    // activeDeadlineSeconds
	Tolerations     []corev1.Toleration
	DeviceClass     string // the GPU's DeviceClass ("": no claim; the image sees every GPU of its node)
	// Resources are the container's extended-resource limits (a device
	// plugin's {"nvidia.com/gpu": 1}), for clusters without DRA.
	Resources corev1.ResourceList
	// ServiceAccount is the Pods' ("": the run's own, named as the Job).
	ServiceAccount string
	MaxBytes       int // the result's size bound (0: DefaultMaxBytes)
}

// serviceAccount is the Pods' ServiceAccount name.
func (s Spec) serviceAccount() string {
	if s.ServiceAccount != "" {
		return s.ServiceAccount
	}
	return s.Name
}

// Job is the fleet's Indexed Job.
func Job(s Spec) *batchv1.Job {
	n := int32(len(s.Nodes))
	par := n
	if s.Parallelism > 0 && int32(s.Parallelism) < n {
		par = int32(s.Parallelism)
	}
	labels := map[string]string{LabelApp: "wakebench", LabelFleet: s.Name}
	fr := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	env := []corev1.EnvVar{
		{Name: EnvConfig, Value: string(s.Config)}, {Name: EnvJob, Value: s.Name},
		{Name: EnvJobUID, ValueFrom: fr("metadata.labels['" + batchv1.ControllerUidLabel + "']")},
		{Name: EnvNode, ValueFrom: fr("spec.nodeName")}, {Name: EnvNamespace, ValueFrom: fr("metadata.namespace")},
		{Name: EnvPod, ValueFrom: fr("metadata.name")},
	}
	if s.MaxBytes > 0 {
		env = append(env, corev1.EnvVar{Name: EnvMaxBytes, Value: fmt.Sprint(s.MaxBytes)})
	}
	// A container that fails before it sent its result: the end of its log
	// becomes its termination message, which the node's FAIL then quotes.
	c := corev1.Container{Name: container, Image: s.Image, Command: slices.Clone(s.Command), Args: slices.Clone(s.Args), Env: env,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	if len(s.Resources) > 0 {
		c.Resources.Limits = s.Resources.DeepCopy()
	}
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		ServiceAccountName:            s.serviceAccount(),
		TerminationGracePeriodSeconds: ptr(int64(30)),
		Tolerations:                   slices.Clone(s.Tolerations),
		Containers:                    []corev1.Container{c},
		Affinity: &corev1.Affinity{
			// Only the selected nodes: the node list is resolved once,
			// before the Job (a node joining mid-run is not tested). A
			// node a Pod was bound to is tainted TestedTaint at once: a
			// finished node must be kept out by more than anti-affinity,
			// which kube-scheduler does not apply against finished Pods
			// (its informer drops Succeeded and Failed Pods:
			// pkg/scheduler/scheduler.go, v1.34); with parallelism below
			// the node count a later index would land on a node already
			// tested.
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: NodeLabel(s.Name), Operator: corev1.NodeSelectorOpIn, Values: []string{NodeSelected}}}}}}},
			// One Pod per node among those running: two indexes bound in
			// the moment before the coordinator taints a node.
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelFleet: s.Name}}}}},
		},
	}
	if s.DeviceClass != "" {
		spec.ResourceClaims = []corev1.PodResourceClaim{{Name: claimName, ResourceClaimTemplateName: ptr(s.Name)}}
		spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: claimName}}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr(batchv1.IndexedCompletion),
			Completions:    &n, Parallelism: &par,
			// Per index: a node's failure is that node's, not retried
			// (onto another node, or the same one) and the others go on.
			BackoffLimitPerIndex:  ptr(int32(0)),
			ActiveDeadlineSeconds: ptr(s.DeadlineS),
			Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// ClaimTemplate is the ResourceClaimTemplate each Pod's claim is made
// from: one device of the class, on the Pod's node (the scheduler
// allocates it there). Its claims carry the fleet's labels, so cleanup
// finds them.
func ClaimTemplate(s Spec) *resourcev1.ResourceClaimTemplate {
	labels := map[string]string{LabelApp: "wakebench", LabelFleet: s.Name}
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: labels},
		Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: claimName,
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: s.DeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}},
	}
}

// RBAC are the objects a fleet Pod's upload needs in namespace ns, all
// named name (the run's Job: runs in one namespace do not share them, so
// one run's cleanup cannot take another's identity away): a
// ServiceAccount, a Role allowing ConfigMaps create, get and update (a
// retried Pod replaces its result) and nothing else, and the binding.
// deploy/rbac.yaml makes the same under ServiceAccount for a cluster
// where the coordinator may not create RBAC objects itself.
func RBAC(ns, name string) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	meta := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{LabelApp: "wakebench", LabelFleet: name}}
	return &corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
}

func ptr[T any](v T) *T { return &v }
