package record

import "maps"

// Kubernetes is the Kubernetes phase: Pods on a real control plane, their
// cold starts, in-Pod restarts and handoffs across Pods on one
// ResourceClaim, what the scheduler's claim accounting allows, and scale to
// zero. Times are seconds on the harness's clock from the action named
// (Pod created, container killed, handoff begun) to the moment a watch
// event or an HTTP answer showed the milestone.
type Kubernetes struct {
	// Cluster says where it ran: the local control plane (versions, node
	// agent) or the kubeconfig's cluster.
	Cluster string
	// Simulated is set when the node is wakebench's node agent running
	// vllmsim: the control plane is real, the node and GPU are not.
	Simulated string
	Namespace string
	Node      string
	// ServerVersion is what the Pods' servers said of themselves (/version).
	ServerVersion string
	Starts        []PodStart
	Restarts      []PodRestart
	Handoffs      []PodHandoff
	Shared        *SharedClaim
	Capacity      *CapacityClaims
	Scale         []ScaleToZero
	Notes         []string
}

// PodStart is one Pod started from nothing: created → … → first token.
// Absent milestones are negative.
type PodStart struct {
	Model, Pod string
	Kind       string // "cold" (the model's first Pod) or "scale-up" (after scale to zero)
	// Seconds from Pod created to each milestone.
	ScheduledS        float64 // PodScheduled True
	ClaimAllocatedS   float64 // its ResourceClaim allocated (before it was created: 0)
	ContainerStartedS float64 // container running
	HealthS           float64 // GET /health 200
	ModelsS           float64 // GET /v1/models lists the model
	FirstTokenS       float64 // first token of a probe
	ContainersReadyS  float64 // the node's readiness probe passed
	ReadyS            float64 // Pod Ready (readiness gate set after the first token)
	RoutableS         float64 // the Service's EndpointSlice lists it ready
	OtherAsleep       bool    // the other model's Pod was asleep on the device meanwhile
}

// PodRestart is the container of a running Pod killed and restarted by
// the node in place (restartPolicy Always): today's warm restart, in a Pod.
type PodRestart struct {
	Model, Pod   string
	HealthS      float64 // kill → GET /health 200
	FirstTokenS  float64 // kill → first token
	RestartCount int32   // the container status's count afterwards
}

// PodHandoff is one switch of the device from one model's Pod to the
// other's: readiness gate of From off and From drained (its endpoint not
// ready in its EndpointSlice), sleep From, wake To, first token, gate of To
// on, Pod Ready, EndpointSlice ready.
type PodHandoff struct {
	From, To    string
	Level       int
	SleepS      float64 // POST /sleep
	WakeS       float64 // the wake API call(s)
	FirstTokenS float64 // handoff begun → first token from To
	ReadyS      float64 // handoff begun → To's Pod Ready
	RoutableS   float64 // handoff begun → To ready in its EndpointSlice
	// UnroutableS is handoff begun → From's endpoint no longer ready: the
	// drain, after which its sleep is sent.
	UnroutableS float64
	UsedGiB     float64 // device memory afterwards (−1 without a memory source)
}

// SharedClaim is one ResourceClaim reserved for both models' Pods.
type SharedClaim struct {
	Claim       string
	Device      string   // driver/pool/device allocated
	ReservedFor []string // Pods in status.reservedFor while both ran
	UsedGiB     float64  // device memory with one asleep, one awake
	// DeallocatedS is last Pod deleted → claim's allocation cleared.
	DeallocatedS float64
}

// CapacityClaims is per-Pod claims on one device's memory capacity
// (DRAConsumableCapacity): the scheduler counts every Pod's request, asleep
// or not.
type CapacityClaims struct {
	DeviceGiB    float64
	Enabled      bool // the device allows multiple allocations (the API server kept the field)
	RequestGiB   map[string]float64
	Scheduled    []string // Pods the scheduler placed
	Refused      string   // the Pod it refused ("" when none)
	Message      string   // its PodScheduled message
	AsleepPods   []string // Pods asleep when it was refused
	UsedGiB      float64  // device memory then (−1 without a memory source)
	FreeGiB      float64
	WouldFit     bool // the refused Pod's request ≤ free device memory
	RequestedGiB float64
}

// ScaleToZero is the awake Pod deleted and a new one started for the same
// model, against waking it from sleep.
type ScaleToZero struct {
	Model, Pod string
	GoneS      float64 // delete → Pod object gone (container stopped)
	ReleasedS  float64 // delete → the Pod off its claim's reservedFor
	FreedGiB   float64 // device memory freed (−1 without a memory source)
	BackS      float64 // new Pod created → first token
	WakeS      float64 // the same model's median handoff → first token, for comparison
}

func cloneKubernetes(k *Kubernetes) *Kubernetes {
	if k == nil {
		return nil
	}
	c := *k
	c.Starts = append([]PodStart(nil), k.Starts...)
	c.Restarts = append([]PodRestart(nil), k.Restarts...)
	c.Handoffs = append([]PodHandoff(nil), k.Handoffs...)
	c.Scale = append([]ScaleToZero(nil), k.Scale...)
	c.Notes = append([]string(nil), k.Notes...)
	if k.Shared != nil {
		s := *k.Shared
		s.ReservedFor = append([]string(nil), s.ReservedFor...)
		c.Shared = &s
	}
	if k.Capacity != nil {
		cc := *k.Capacity
		cc.RequestGiB = maps.Clone(cc.RequestGiB)
		cc.Scheduled = append([]string(nil), cc.Scheduled...)
		cc.AsleepPods = append([]string(nil), cc.AsleepPods...)
		c.Capacity = &cc
	}
	return &c
}
