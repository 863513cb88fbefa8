package fleetjob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wakebench/wakebench/internal/fleetreport"
	"github.com/wakebench/wakebench/internal/kube"
)

// Selection says which nodes run the suite. Nodes, when set, names them;
// else NodeSelector's nodes; and with Driver, only nodes publishing a
// device of that DRA driver in a ResourceSlice (the device class's
// driver: every GPU node, without a selector).
type Selection struct {
	Nodes        []string
	NodeSelector map[string]string
	Driver       string
}

func (s Selection) String() string {
	var parts []string
	if len(s.Nodes) > 0 {
		parts = append(parts, "nodes "+strings.Join(s.Nodes, ","))
	}
	if len(s.NodeSelector) > 0 {
		parts = append(parts, "node selector "+labels.SelectorFromSet(s.NodeSelector).String())
	}
	if s.Driver != "" {
		parts = append(parts, "nodes publishing DRA driver "+s.Driver)
	}
	if len(parts) == 0 {
		return "every node"
	}
	return strings.Join(parts, "; ")
}

type selection struct {
	nodes  []string
	gpus   map[string]string // node → GPU kind
	notRun []fleetreport.NodeResult
}

// selectNodes resolves s to node names, each with its GPU kind: the
// productName its ResourceSlice publishes (the NVIDIA DRA driver and the
// local node agent both do), else its nvidia.com/gpu.product label.
func selectNodes(ctx context.Context, c *kube.Clients, s Selection) (selection, error) {
	out := selection{gpus: map[string]string{}}
	nl, err := c.Core.Nodes().List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(s.NodeSelector).String()})
	if err != nil {
		return out, fmt.Errorf("fleet: list nodes: %w", err)
	}
	nodes := map[string]corev1.Node{}
	for _, n := range nl.Items {
		nodes[n.Name] = n
	}
	published := map[string]string{} // node → product, for nodes with a device of the driver
	if s.Driver != "" {
		sl, err := c.Resource.ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return out, fmt.Errorf("fleet: list ResourceSlices: %w", err)
		}
		for _, rs := range sl.Items {
			if rs.Spec.Driver != s.Driver || rs.Spec.NodeName == nil || len(rs.Spec.Devices) == 0 {
				continue
			}
			product := ""
			if a, ok := rs.Spec.Devices[0].Attributes["productName"]; ok && a.StringValue != nil {
				product = *a.StringValue
			}
			published[*rs.Spec.NodeName] = product
		}
	}
	names := slices.Sorted(maps.Keys(nodes))
	if len(s.Nodes) > 0 {
		names = nil
		for _, n := range s.Nodes {
			if _, ok := nodes[n]; !ok {
				out.notRun = append(out.notRun, fleetreport.NodeResult{Node: n, Status: fleetreport.StatusNotRun,
					Reason: "no such node (or it does not match the node selector)"})
				continue
			}
			names = append(names, n)
		}
	}
	for _, n := range names {
		product, ok := published[n]
		if s.Driver != "" && !ok {
			if len(s.Nodes) > 0 {
				out.notRun = append(out.notRun, fleetreport.NodeResult{Node: n, Status: fleetreport.StatusNotRun,
					Reason: "publishes no device of DRA driver " + s.Driver})
			}
			continue
		}
		if product == "" {
			product = strings.ReplaceAll(nodes[n].Labels["nvidia.com/gpu.product"], "-", " ")
		}
		out.nodes = append(out.nodes, n)
		out.gpus[n] = product
	}
	return out, nil
}
