package traffic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/config"
	"github.com/wakebench/wakebench/internal/record"
)

func TestTrafficChecks(t *testing.T) {
	cfg := config.SimDefault()
	cfg.Thresholds.MaxAsleepFirstTokenP99S = 0.5
	t0 := time.Unix(1_700_000_000, 0)
	r := func(run, model string, s int, waited, good bool, ttft float64) record.TrafficRequest {
		return record.TrafficRequest{Run: run, Model: model, Planned: t0.Add(time.Duration(s) * time.Second), Done: t0.Add(time.Duration(s+1) * time.Second),
			Waited: waited, Good: good, TTFTS: ttft}
	}
	tr := record.Traffic{
		Requests: []record.TrafficRequest{
			r(record.RunShared, "A", 0, true, true, 0.2), r(record.RunShared, "B", 1, true, false, 0.9), r(record.RunShared, "A", 2, false, true, 0.01),
			r(record.RunIdeal, "A", 0, false, true, 0.01), r(record.RunIdeal, "B", 1, false, true, 0.01), r(record.RunIdeal, "A", 2, false, true, 0.01),
		},
		IdealRan: true,
		InFlight: []record.InFlight{{Mode: "wait", Survived: true}, {Mode: "keep", Survived: false, Unexpected: 2}},
	}
	cs := trafficChecks(cfg, tr)
	v := verdicts(cs)
	assert.Equal(t, map[string]string{"traffic.failed_requests/": "PASS", "traffic.shed_requests/": "PASS", "traffic.ideal.failed_requests/": "PASS", "traffic.goodput_ratio/": "PASS",
		"traffic.asleep_first_token_s.p99/A": "PASS", "traffic.asleep_first_token_s.p99/B": "FAIL",
		"traffic.in_flight.wait.survived/": "PASS", "traffic.in_flight.wait.unexpected/": "PASS",
		"traffic.in_flight.keep.survived/": "FAIL", "traffic.in_flight.keep.unexpected/": "FAIL"}, v)
	for _, c := range cs {
		if c.Name == "traffic.goodput_ratio" {
			assert.InDelta(t, 2.0/3, c.Value, 1e-9, "2 good against 3, over the same 3 s")
		}
	}
	tr.IdealRan, tr.IdealNote = false, "the models need 9 GiB more awake, the GPU has 4 GiB free"
	for _, c := range trafficChecks(cfg, tr) {
		if c.Name == "traffic.goodput_ratio" {
			assert.Equal(t, record.NotEvaluated, c.Verdict)
			assert.Equal(t, tr.IdealNote, c.Reason)
			assert.False(t, c.Required, "left at its default")
		}
	}
}

// TestShedRequestsAreGatedApartFromFailures: a request the router shed
// (its queue full, never sent) is not a failed request; it counts in
// traffic.shed_requests against max_shed_requests.
func TestShedRequestsAreGatedApartFromFailures(t *testing.T) {
	cfg := config.Default()
	req := func(shed bool, err string) record.TrafficRequest {
		return record.TrafficRequest{Run: record.RunShared, Model: "A", Shed: shed, Err: err}
	}
	tr := record.Traffic{Requests: []record.TrafficRequest{req(false, ""), req(true, "shed: the router's queue is full"),
		req(true, "shed: the router's queue is full"), req(false, "server A exited")}}
	byName := map[string]record.Check{}
	for _, c := range trafficChecks(cfg, tr) {
		byName[c.Name] = c
	}
	assert.Equal(t, 1.0, byName["traffic.failed_requests"].Value, "the shed ones are not failures")
	assert.Equal(t, 2.0, byName["traffic.shed_requests"].Value)
	assert.Equal(t, "FAIL", byName["traffic.shed_requests"].Verdict, "none may be shed by default")
	cfg.Thresholds.MaxShedRequests, cfg.Thresholds.MaxFailedRequests = 2, 1
	for _, c := range trafficChecks(cfg, tr) {
		if c.Name == "traffic.shed_requests" || c.Name == "traffic.failed_requests" {
			assert.Equal(t, "PASS", c.Verdict, c.Name)
		}
	}
}

// TestTrafficIdealFailuresCount: a request of the all-awake run that fails
// (its server crashed) fails a check, as one through the router does.
func TestTrafficIdealFailuresCount(t *testing.T) {
	cfg := config.Default()
	tr := record.Traffic{IdealRan: true, Requests: []record.TrafficRequest{
		{Run: record.RunShared, Model: "A"}, {Run: record.RunIdeal, Model: "A", Err: "server A exited: exit status 3"},
		{Run: record.RunIdeal, Model: "A", WarmUp: true, Err: "warm-up: not counted"}}}
	v := verdicts(trafficChecks(cfg, tr))
	assert.Equal(t, "PASS", v["traffic.failed_requests/"])
	assert.Equal(t, "FAIL", v["traffic.ideal.failed_requests/"])
	for _, c := range trafficChecks(cfg, tr) {
		if c.Name == "traffic.ideal.failed_requests" {
			assert.Equal(t, 1.0, c.Value, "the warm-up request is not counted")
		}
	}
}

// TestTrafficWithoutRequestsKeepsUserThresholds: with no request through
// the router (rate 0), a traffic threshold the user set is not dropped:
// it is not evaluated, required, so the run fails; defaults stay silent.
func TestTrafficWithoutRequestsKeepsUserThresholds(t *testing.T) {
	cfg := config.Default()
	assert.Empty(t, trafficChecks(cfg, record.Traffic{}), "defaults: nothing to say without traffic")
	cfg.UserThresholds = []string{"min_traffic_goodput_ratio"}
	cfg.Models[1].Thresholds = map[string]float64{"max_asleep_first_token_p99_s": 2}
	cs := trafficChecks(cfg, record.Traffic{})
	require.Len(t, cs, 2)
	for _, c := range cs {
		assert.Equal(t, record.NotEvaluated, c.Verdict, c.Name)
		assert.True(t, c.Required, c.Name)
		assert.True(t, c.Fails(), "a required check not evaluated fails the run: %s", c.Name)
		assert.Contains(t, c.Reason, "traffic.rate 0")
	}
	assert.Equal(t, "B", cs[1].Model)
	cfg.UserThresholds = append(cfg.UserThresholds, "max_shed_requests")
	assert.Len(t, trafficChecks(cfg, record.Traffic{}), 3, "max_shed_requests too")

	// 0 turns a ratio or a time limit off: nothing to evaluate, no FAIL;
	// max_shed_requests 0 is a limit (none shed) and stays required.
	cfg.Thresholds.MinTrafficGoodputRatio, cfg.Thresholds.MaxShedRequests = 0, 0
	cfg.Models[1].Thresholds = map[string]float64{"max_asleep_first_token_p99_s": 0}
	cs = trafficChecks(cfg, record.Traffic{})
	require.Len(t, cs, 1, "only the shed count: %v", cs)
	assert.Equal(t, "traffic.shed_requests", cs[0].Name)
	assert.True(t, cs[0].Fails())
}

// TestTrafficKeepsAUserThresholdOfAModelWithoutSamples: a model none of
// whose requests found it asleep (a trace that names only A) keeps the
// first-token threshold the user set for it, not evaluated, required.
func TestTrafficKeepsAUserThresholdOfAModelWithoutSamples(t *testing.T) {
	cfg := config.Default()
	cfg.Models[1].Thresholds = map[string]float64{"max_asleep_first_token_p99_s": 2}
	tr := record.Traffic{Requests: []record.TrafficRequest{{Run: record.RunShared, Model: "A", Waited: true, TTFTS: 0.1}}}
	v := verdicts(trafficChecks(cfg, tr))
	assert.Equal(t, "PASS", v["traffic.asleep_first_token_s.p99/A"])
	assert.Equal(t, record.NotEvaluated, v["traffic.asleep_first_token_s.p99/B"])
}

func verdicts(cs []record.Check) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Name+"/"+c.Model] = c.Verdict
	}
	return out
}
