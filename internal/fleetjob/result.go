package fleetjob

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/variants"
)

// ConfigMapMax is the API server's bound on a ConfigMap's data and
// binaryData together (corev1.MaxSecretSize: 1 MiB, validation's
// "must have at most 1048576 bytes").
const ConfigMapMax = 1 << 20

// DefaultMaxBytes bounds a node's result: under ConfigMapMax, with room
// for the keys and metadata.
const DefaultMaxBytes = ConfigMapMax - 16<<10

// Keys of a result ConfigMap.
const (
	keyReport    = "report.json.gz"
	keyBench     = "bench.txt.gz"
	keySamples   = "samples.csv.gz"
	keyCompare   = "comparison.json.gz" // a variant run's; absent on a run of one build
	keyNode      = "node"
	keyPod       = "pod"
	keyExit      = "exit_code"
	keyTruncated = "samples_truncated" // "true": samples.csv was cut at a line to fit
	keyFullBytes = "samples_bytes"     // samples.csv's size before any cut
)

// Result is one node's run as its Pod sends it.
type Result struct {
	Node, Pod string
	ExitCode  int // the test binary's
	Report    []byte
	Bench     []byte
	Samples   []byte
	// Comparison is a variant run's comparison.json (nil otherwise); its
	// Report and Samples are then the reference variant's first run's.
	Comparison []byte
	// Truncated: Samples was cut to fit (SamplesBytes is its whole size).
	Truncated    bool
	SamplesBytes int
}

// ResultName is the result ConfigMap of index i of Job job.
func ResultName(job string, index string) string { return job + "-result-" + index }

// Encode is r as a ConfigMap of at most maxBytes of data (0:
// DefaultMaxBytes; never above ConfigMapMax), owned by the Job (uid) so
// it outlives the Pod and goes with the Job. The report and bench.txt must
// fit; samples.csv is cut at a line boundary (its header kept) when it
// does not, and the cut is flagged.
func Encode(r Result, job string, jobUID types.UID, index, ns string, maxBytes int) (*corev1.ConfigMap, error) {
	if maxBytes <= 0 || maxBytes > DefaultMaxBytes {
		maxBytes = DefaultMaxBytes
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ResultName(job, index), Namespace: ns,
			Labels: map[string]string{LabelApp: "wakebench", LabelFleet: job, LabelNode: r.Node}},
		Data:       map[string]string{keyNode: r.Node, keyPod: r.Pod, keyExit: strconv.Itoa(r.ExitCode), keyFullBytes: strconv.Itoa(len(r.Samples))},
		BinaryData: map[string][]byte{},
	}
	if jobUID != "" {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: jobUID}}
	}
	used := 0
	for _, v := range cm.Data {
		used += len(v)
	}
	must := map[string][]byte{keyReport: r.Report, keyBench: r.Bench}
	if r.Comparison != nil {
		must[keyCompare] = r.Comparison
	}
	for k, b := range must {
		z := gz(b)
		cm.BinaryData[k] = z
		used += len(z)
	}
	if used > maxBytes {
		return nil, fmt.Errorf("node %s: report.json and bench.txt (and a variant run's comparison.json) are %d bytes gzipped, over the result's bound of %d", r.Node, used, maxBytes)
	}
	samples, truncated := fit(r.Samples, maxBytes-used-len("true"))
	cm.BinaryData[keySamples] = samples
	cm.Data[keyTruncated] = strconv.FormatBool(truncated)
	return cm, nil
}

// fit is csv gzipped in at most room bytes: whole, or its first lines
// (the header always) as many as fit, and whether it was cut. The csv is
// compressed once, up to where it is cut, a chunk of lines at a time with
// a flush after each, so the compressed size is known at every chunk's
// end: a chunk is written only if even deflate's worst case for it still
// fits. What is left unused is under one chunk (fitChunk of input); a
// search over the line count would compress the file a dozen times (a
// minute under the race detector for 6 MB).
func fit(csv []byte, room int) ([]byte, bool) {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	const trailer = 32 // the final empty block, the gzip trailer, and slack
	start := 0
	for first := true; start < len(csv); first = false {
		end := start + fitChunk
		if first {
			end = bytes.IndexByte(csv, '\n') + 1 // the header alone first: it is always kept
		}
		if end <= start || end >= len(csv) {
			end = len(csv)
		} else if i := bytes.IndexByte(csv[end:], '\n'); i >= 0 {
			end += i + 1
		} else {
			end = len(csv)
		}
		if n := end - start; !first && buf.Len()+n+5*(n/16384+2)+trailer > room {
			break // stored blocks: 5 bytes per block at worst, and the flush's
		}
		w.Write(csv[start:end]) // a bytes.Buffer does not fail
		w.Flush()
		start = end
	}
	w.Close()
	return buf.Bytes(), start < len(csv)
}

// fitChunk is how much of the csv fit adds before it looks at the size.
const fitChunk = 16 << 10

// Decode is the Result a ConfigMap made by Encode holds.
func Decode(cm *corev1.ConfigMap) (Result, error) {
	r := Result{Node: cm.Data[keyNode], Pod: cm.Data[keyPod], Truncated: cm.Data[keyTruncated] == "true"}
	var err error
	if r.ExitCode, err = strconv.Atoi(cm.Data[keyExit]); err != nil {
		return r, fmt.Errorf("result %s: exit code %q: %w", cm.Name, cm.Data[keyExit], err)
	}
	r.SamplesBytes, _ = strconv.Atoi(cm.Data[keyFullBytes])
	for k, dst := range map[string]*[]byte{keyReport: &r.Report, keyBench: &r.Bench, keySamples: &r.Samples, keyCompare: &r.Comparison} {
		z, ok := cm.BinaryData[k]
		if !ok && k == keyCompare {
			continue // a run of one build
		}
		if !ok {
			return r, fmt.Errorf("result %s: no %s", cm.Name, k)
		}
		if *dst, err = gunzip(z); err != nil {
			return r, fmt.Errorf("result %s: %s: %w", cm.Name, k, err)
		}
	}
	return r, nil
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(b) // a bytes.Buffer does not fail
	w.Close()
	return buf.Bytes()
}

func gunzip(z []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}

// Upload sends the node run's outputs in outDir (report.json, bench.txt,
// samples.csv: a missing one is sent empty; on a variant run its
// comparison.json, with those three of one run of the reference variant,
// variants.ReferenceRun, so that the node's figures and samples are one
// run's of one build, as a plain node's) as the Pod's result
// ConfigMap, replacing one a previous try of the index left. The Pod's
// identity comes from its environment (the Job's downward-API env), its
// credentials from client-go's defaults (the Pod's ServiceAccount in a
// cluster; KUBECONFIG on a local node).
func Upload(ctx context.Context, c *kube.Clients, getenv func(string) string, outDir string, exitCode int) error {
	ns, job, node := getenv(EnvNamespace), getenv(EnvJob), getenv(EnvNode)
	if ns == "" || job == "" || node == "" {
		return fmt.Errorf("fleet upload: %s, %s and %s must be set (the fleet Job sets them)", EnvNamespace, EnvJob, EnvNode)
	}
	index := getenv("JOB_COMPLETION_INDEX")
	if index == "" {
		return errors.New("fleet upload: JOB_COMPLETION_INDEX unset: not a Pod of an Indexed Job")
	}
	r := Result{Node: node, Pod: getenv(EnvPod), ExitCode: exitCode}
	runDir := outDir // where report.json, bench.txt and samples.csv are
	comparison, err := os.ReadFile(filepath.Join(outDir, variants.ComparisonFile))
	switch {
	case err == nil:
		r.Comparison = comparison
		if runDir, err = variants.ReferenceRun(outDir, comparison); err != nil {
			runDir = "" // no reference run wrote a report: sent empty, the node FAILs saying so
		}
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("fleet upload: %w", err)
	}
	for name, dst := range map[string]*[]byte{"report.json": &r.Report, "bench.txt": &r.Bench, "samples.csv": &r.Samples} {
		if runDir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(runDir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fleet upload: %w", err)
		}
		*dst = b
	}
	maxBytes, _ := strconv.Atoi(getenv(EnvMaxBytes))
	cm, err := Encode(r, job, types.UID(getenv(EnvJobUID)), index, ns, maxBytes)
	if err != nil {
		return fmt.Errorf("fleet upload: %w", err)
	}
	_, err = c.Core.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = c.Core.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("fleet upload: result ConfigMap %s/%s: %w", ns, cm.Name, err)
	}
	return nil
}
