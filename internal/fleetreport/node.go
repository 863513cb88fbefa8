// Package fleetreport merges the results of a fleet run (the suite run once on every GPU node
// of a cluster) into one report: each node's status and reason, per GPU kind the summaries
// computed from the nodes' pooled raw samples (never from merged percentiles), the outlier
// nodes against their own kind's distribution (normalised per kind, so a smaller node shape is
// not failed for being smaller), and the outputs fleet.json, fleet.md, fleet.html (package htmlreport) and a merged bench.txt
// whose results carry `node:` and `gpu:` config keys.
package fleetreport

// Node statuses.
const (
	StatusPass   = "PASS"
	StatusFail   = "FAIL"
	StatusNotRun = "NOT RUN"
)

// NodeResult is what one node's run sends back to the coordinator: the contract between the
// fleet runner (package fleetjob) and this package.
type NodeResult struct {
	// Node is the Kubernetes node name.
	Node string `json:"node"`
	// GPU is the node's GPU kind, e.g. "NVIDIA H100 80GB HBM3"; nodes are grouped by it.
	GPU string `json:"gpu"`
	// Status is StatusPass, StatusFail or StatusNotRun as the runner saw it (a Pod that never
	// scheduled, was evicted, timed out: FAIL or NOT RUN with Reason). Build may turn PASS into
	// FAIL (a report that cannot be parsed, or one that says FAIL).
	Status string `json:"status"`
	// Reason says why a node is not PASS.
	Reason string `json:"reason,omitempty"`
	// Report is the node's report.json (nil when none came back). On a
	// variant run's node it is the reference variant's first run's.
	Report []byte `json:"-"`
	// Comparison is a variant run's comparison.json (package variants;
	// nil on a run of one build): the node's verdict is its verdict too.
	Comparison []byte `json:"-"`
	// Bench is the node's bench.txt (benchfmt; nil when none came back).
	Bench []byte `json:"-"`
	// Samples is the node's samples.csv, possibly cut short (then Truncated is true).
	Samples   []byte `json:"-"`
	Truncated bool   `json:"truncated,omitempty"`
}
