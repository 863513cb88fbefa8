package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/perf/benchfmt"

	"github.com/wakebench/wakebench/internal/record"
)

func sampleKubernetes() *record.Kubernetes {
	start := func(m, pod, kind string, ft float64) record.PodStart {
		return record.PodStart{Model: m, Pod: pod, Kind: kind, ScheduledS: 0.02, ClaimAllocatedS: 0.01, ContainerStartedS: 0.05,
			HealthS: ft - 0.01, ModelsS: ft - 0.005, FirstTokenS: ft, ContainersReadyS: ft + 0.1, ReadyS: ft + 0.02, RoutableS: ft + 0.03}
	}
	return &record.Kubernetes{Cluster: "local control plane", Simulated: "simulated node", Namespace: "wakebench",
		Starts:   []record.PodStart{start("A", "a-1", "cold", 0.6), start("B", "b-1", "cold", 0.4), start("B", "b-2", "scale-up", 0.42)},
		Restarts: []record.PodRestart{{Model: "A", Pod: "a-1", HealthS: 0.3, FirstTokenS: 0.35, RestartCount: 1}},
		Handoffs: []record.PodHandoff{
			{From: "B", To: "A", Level: 1, SleepS: 0.05, WakeS: 0.03, FirstTokenS: 0.09, ReadyS: 0.11, RoutableS: 0.12, UnroutableS: 0.01},
			{From: "A", To: "B", Level: 1, SleepS: 0.03, WakeS: 0.02, FirstTokenS: 0.06, ReadyS: 0.08, RoutableS: -1, UnroutableS: 0.01},
		},
		Shared:   &record.SharedClaim{Claim: "wakebench-gpu", Device: "d/p/gpu-0", ReservedFor: []string{"a-1", "b-1"}, UsedGiB: 20, DeallocatedS: 0.02},
		Capacity: &record.CapacityClaims{DeviceGiB: 48, Enabled: true, Scheduled: []string{"a-2", "b-3"}, AsleepPods: []string{"a-2"}, Refused: "a-3", Message: "cannot allocate all claims", RequestedGiB: 19.2, FreeGiB: 28, WouldFit: true},
		Scale:    []record.ScaleToZero{{Model: "B", Pod: "b-1", GoneS: 0.01, ReleasedS: 0.02, FreedGiB: 19, BackS: 0.42, WakeS: 0.06}},
	}
}

func TestKubernetesInTheReport(t *testing.T) {
	raw := sampleRaw()
	rep := Build(raw)
	assert.False(t, rep.DRA.Executed)
	assert.Contains(t, rep.DRA.Summary, "not executed")
	assert.Nil(t, rep.RestartBaseline.Pod, "no Pod figures without the phase")

	raw.Kubernetes = sampleKubernetes()
	rep = Build(raw)
	d := rep.DRA
	assert.True(t, d.Executed)
	assert.Contains(t, d.Summary, "executed on local control plane: 3 Pods")
	assert.Contains(t, d.Summary, "(simulated node)", "a simulated node says so in the summary")
	require.Contains(t, d.Switch, "A→B")
	assert.Equal(t, 1, d.Switch["A→B"].N)
	assert.Equal(t, 0, d.Switch["A→B"].RoutableS.N, "an absent milestone (−1) is left out")
	assert.Equal(t, "a-3", d.Capacity.Refused)
	assert.Len(t, d.PodStarts, 3)

	b := rep.RestartBaseline.Pod["B"]
	require.NotNil(t, b)
	assert.Equal(t, []string{"cold", "scale-up"}, b.ColdStart.Kinds)
	assert.Equal(t, 2, b.ColdStart.ToFirstTokenS.N)
	assert.InDelta(t, 0.41, b.ColdStart.ToFirstTokenS.Median, 1e-9)
	assert.Nil(t, b.InPodRestart, "B was not restarted in place")
	require.NotNil(t, b.Wake)
	assert.Equal(t, 0, b.Wake.RoutableS.N, "an absent milestone (−1) is left out, not summarised")
	a := rep.RestartBaseline.Pod["A"]
	require.NotNil(t, a.InPodRestart)
	assert.InDelta(t, 0.35, a.InPodRestart.ToFirstTokenS.Median, 1e-9)
	assert.Contains(t, rep.RestartBaseline.Summary, "Pod cold starts")

	var sum bytes.Buffer
	require.NoError(t, WriteSummary(&sum, rep))
	assert.Contains(t, sum.String(), "## Kubernetes (local control plane)")
	assert.Contains(t, sum.String(), "| A | 0.6 ")
	assert.Contains(t, sum.String(), "refused a-3, whose 19.20 GiB would fit the 28.00 GiB free")

	var bench bytes.Buffer
	require.NoError(t, WriteBench(&bench, raw))
	names := map[string]int{}
	rd := benchfmt.NewReader(&bench, "bench.txt")
	for rd.Scan() {
		if r, ok := rd.Result().(*benchfmt.Result); ok && strings.HasPrefix(string(r.Name), "Pod") {
			names[string(r.Name.Base())]++
			for _, v := range r.Values {
				assert.GreaterOrEqual(t, v.Value, 0.0, "no absent (−1) value in bench.txt: %s", r.Name)
			}
		}
	}
	require.NoError(t, rd.Err())
	assert.Equal(t, map[string]int{"PodStart": 3, "PodRestart": 1, "PodSwitch": 2}, names)
}
