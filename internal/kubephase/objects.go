package kubephase

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wakebench/wakebench/internal/backend"
	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/vllm"
)

// The objects' names and labels.
const (
	// AwakeGate is the readiness gate tied to sleep state: the phase sets it
	// True after a wake's first token and False before a sleep, so a
	// sleeping Pod is never Ready and its Service sends it nothing.
	AwakeGate   = corev1.PodConditionType("wakebench.io/awake")
	labelApp    = "app.kubernetes.io/name"
	labelModel  = "wakebench.io/model"
	SharedClaim = "wakebench-gpu"
	portName    = "http"
)

func ptr[T any](v T) *T { return &v }

func lower(label string) string { return strings.ToLower(label) }

// serviceName is model label's Service.
func serviceName(label string) string { return "wakebench-" + lower(label) }

// podSpec is model m's Pod: `vllm serve` with sleep mode, one container
// that claims the device through claim, a readiness probe on /health and
// the awake readiness gate.
func podSpec(cfg config.Config, m config.Model, name, claim string, host string, port int) *corev1.Pod {
	k := cfg.Kubernetes
	args := vllm.ServeArgs(vllm.ServeOptions{Model: m.Name, Host: host, Port: port, MaxModelLen: cfg.Protocol.ContextTokens,
		KVCacheBytes: cfg.KVBytes(), GPUMemoryUtilization: m.GPUMemoryUtilization, Extra: m.ExtraArgs})
	var env []corev1.EnvVar
	for _, e := range vllm.ServerEnv("") {
		n, v, _ := strings.Cut(e, "=")
		env = append(env, corev1.EnvVar{Name: n, Value: v})
	}
	if m.SimFaults != "" {
		n, v, _ := strings.Cut(backend.SimFaultsEnv(m.SimFaults), "=")
		env = append(env, corev1.EnvVar{Name: n, Value: v})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Namespace,
			Labels: map[string]string{labelApp: "wakebench", labelModel: lower(m.Label)}},
		Spec: corev1.PodSpec{
			HostNetwork:                   k.HostNetwork,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(cfg.Timeouts.StopS)),
			ReadinessGates:                []corev1.PodReadinessGate{{ConditionType: AwakeGate}},
			ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr(claim)}},
			Containers: []corev1.Container{{
				Name: "vllm", Image: k.Image, Command: []string{"vllm"}, Args: args, Env: env,
				Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromString(portName)}},
					PeriodSeconds: 1, FailureThreshold: 1},
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
}

// service routes to model label's Pods that are Ready (awake).
func service(ns, label string, port int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: serviceName(label), Namespace: ns, Labels: map[string]string{labelApp: "wakebench"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{labelModel: lower(label)},
			Ports: []corev1.ServicePort{{Name: portName, Port: int32(port), TargetPort: intstr.FromString(portName)}}},
	}
}

// claimSpec is a claim for one device of class; with capacity > 0 it asks
// for that much of the device's memory (DRAConsumableCapacity) rather than
// the whole device.
func claimSpec(ns, name, class string, capacity int64) *resourcev1.ResourceClaim {
	req := &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
	if capacity > 0 {
		req.Capacity = &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{
			"memory": *resource.NewQuantity(capacity, resource.BinarySI)}}
	}
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{labelApp: "wakebench"}},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: req}}}},
	}
}

// deviceClass selects driver's devices.
func deviceClass(name, driver string) *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: "device.driver == " + strconv.Quote(driver)}}}},
	}
}
