package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/wakebench/wakebench/internal/record"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
)

// WriteFile writes path atomically: a temporary file in the same directory,
// synced, then renamed over path. A reader never sees half a file.
func WriteFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	bw := bufio.NewWriter(tmp)
	if err := write(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // keep "A→B" readable
	return enc.Encode(rep)
}

// SamplesWriter writes samples.csv as samples come, one value per row:
//
//	unix_s,source,label,pid,bytes,simulated
//
// source is device_used, device_total, process_gpu, host_rss, or on a run
// of several GPUs gpu_used (label gpu0, gpu1, …); label is the model label
// owning the process (empty if none); simulated is 1 on every
// row of a simulated run (vllmsim's modelled memory), 0 otherwise. It is
// not safe for concurrent use; callers serialise.
type SamplesWriter struct {
	cw  *csv.Writer
	sim string
}

// NewSamplesWriter writes the header.
func NewSamplesWriter(w io.Writer, simulated bool) (*SamplesWriter, error) {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"unix_s", "source", "label", "pid", "bytes", "simulated"}); err != nil {
		return nil, err
	}
	sw := &SamplesWriter{cw: cw}
	sw.SetSimulated(simulated)
	return sw, nil
}

func ts(t time.Time) string { return strconv.FormatFloat(unix(t), 'f', 6, 64) }
func u64(b uint64) string   { return strconv.FormatUint(b, 10) }

// GPU writes one GPU sample: device used and total, then each process.
func (w *SamplesWriter) GPU(s gpu.Sample, labelOf func(pid int) string) {
	t := ts(s.Time)
	w.cw.Write([]string{t, "device_used", "", "", u64(s.Used), w.sim})
	w.cw.Write([]string{t, "device_total", "", "", u64(s.Total), w.sim})
	for _, pid := range slices.Sorted(maps.Keys(s.Procs)) {
		w.cw.Write([]string{t, "process_gpu", labelOf(pid), strconv.Itoa(pid), u64(s.Procs[pid]), w.sim})
	}
	if len(s.Devices) > 1 { // each GPU of a run of several: label gpu0, gpu1, …
		for i, d := range s.Devices {
			w.cw.Write([]string{t, "gpu_used", "gpu" + strconv.Itoa(i), "", u64(d.Used), w.sim})
		}
	}
}

// SetSimulated sets the simulated column of the rows written from now on
// (a server run by path can reveal it is vllmsim only once it answers).
func (w *SamplesWriter) SetSimulated(simulated bool) {
	w.sim = "0"
	if simulated {
		w.sim = "1"
	}
}

// RSS writes one host RSS sample.
func (w *SamplesWriter) RSS(r record.RSSSample) {
	w.cw.Write([]string{ts(r.Time), "host_rss", r.Label, "", u64(r.Bytes), w.sim})
}

// Flush writes buffered rows to the underlying writer.
func (w *SamplesWriter) Flush() error {
	w.cw.Flush()
	return w.cw.Error()
}

// WriteSamples writes a whole samples.csv at once.
func WriteSamples(w io.Writer, samples []gpu.Sample, rss []record.RSSSample, labelOf func(pid int) string, simulated bool) error {
	sw, err := NewSamplesWriter(w, simulated)
	if err != nil {
		return err
	}
	for _, s := range samples {
		sw.GPU(s, labelOf)
	}
	for _, r := range rss {
		sw.RSS(r)
	}
	return sw.Flush()
}
