package nodeagent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube"
)

// registerNode creates the Node: ready, with the node agent as its kubelet
// and its address.
func (a *Agent) registerNode(ctx context.Context) error {
	now := metav1.Now()
	labels := map[string]string{}
	maps.Copy(labels, a.o.Labels)
	labels["kubernetes.io/hostname"], labels["kubernetes.io/os"] = a.o.Node, "linux"
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: a.o.Node, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: slices.Clone(a.o.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("128Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "WakebenchNodeAgentReady",
				Message: "wakebench node agent (host processes)", LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: a.o.IP}, {Type: corev1.NodeHostName, Address: a.o.Node}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "wakebench-nodeagent", OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "host-process://wakebench"},
		},
	}
	if _, err := a.c.Core.Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", a.o.Node, err)
	}
	return nil
}

// SliceName is the name of the node's ResourceSlice.
func (a *Agent) SliceName() string { return a.o.Node + "-gpus" }

// publish writes the node's ResourceSlice: one device per GPU, with its
// UUID and product as attributes and its memory as capacity that may be
// shared out (DRAConsumableCapacity: allowMultipleAllocations).
func (a *Agent) publish(ctx context.Context) error {
	var devs []resourcev1.Device
	for _, g := range a.o.GPUs {
		devs = append(devs, resourcev1.Device{
			Name: g.Name,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"uuid": {StringValue: ptr(g.UUID)}, "productName": {StringValue: ptr(g.Product)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(int64(g.MemoryBytes), resource.BinarySI)},
			},
			AllowMultipleAllocations: ptr(true),
		})
	}
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: a.SliceName()},
		Spec: resourcev1.ResourceSliceSpec{Driver: a.o.Driver, NodeName: &a.o.Node, Devices: devs,
			Pool: resourcev1.ResourcePool{Name: a.o.Node, Generation: 1, ResourceSliceCount: 1}},
	}
	if _, err := a.c.Resource.ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("node %s: publish ResourceSlice: %w", a.o.Node, err)
	}
	return nil
}

// waitSchedulable waits until the node carries no NoSchedule taint but
// its own (Options.Taints): the control plane's not-ready taint is gone.
func (a *Agent) waitSchedulable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.o.Ready)
	defer cancel()
	p, err := kube.Track(ctx, a.c.Core.Nodes().Watch, a.o.Node, "", []kube.Milestone[*corev1.Node]{{Name: "schedulable", Reached: func(n *corev1.Node) bool {
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule && !slices.ContainsFunc(a.o.Taints, func(o corev1.Taint) bool { return o.MatchTaint(&t) })
		})
	}}}, nil)
	if err != nil {
		var taints []string
		if p.Seen {
			for _, t := range p.Last.Spec.Taints {
				taints = append(taints, t.Key+":"+string(t.Effect))
			}
		}
		return fmt.Errorf("node %s not schedulable after %v (taints %v): is kube-controller-manager running (its node lifecycle controller lifts node.kubernetes.io/not-ready)? %w",
			a.o.Node, a.o.Ready, taints, err)
	}
	return nil
}
