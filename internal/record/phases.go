package record

// The protocol's phase names, each declared once (issue 51): the report's
// phases, windows and failures, the serving and engine-health stages and
// the correctness replays of the same phases, bench.txt's stage= and the
// host-load windows, and the gate's windows all name a phase by these.
const (
	PhaseRestart   = "restart"
	PhaseBaseline  = "baseline"
	PhaseSleepL1   = "sleep-level1"
	PhaseAfterWake = "after-wake"
	PhaseSleepL2   = "sleep-level2"
	// PhaseAfterWakeL2 is after-wake at level 2: the reload path (vllm#52479's draft model).
	PhaseAfterWakeL2 = "after-wake-l2"
	PhaseSleepL0     = "sleep-level0"
	PhaseKVRelease   = "kv-release"
	PhaseStateCost   = "state-cost"
	PhaseSwitch      = "switch"
	PhaseTraffic     = "traffic"    // run by package traffic, through Begin, Fail and StartAll
	PhaseSoak        = "soak"       // TestSoak: not one of the protocol's phases (package phases), it runs only when protocol.soak_cycles is set
	PhaseKubernetes  = "kubernetes" // package kubephase
)
