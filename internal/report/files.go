package report

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
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

// WriteSamples writes every GPU and RSS sample as CSV, one value per row:
//
//	unix_s,source,label,pid,bytes
//
// source is device_used, device_total, process_gpu or host_rss; label is the
// model label owning the process (empty if none).
func WriteSamples(w io.Writer, samples []gpu.Sample, rss []RSSSample, labelOf func(pid int) string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"unix_s", "source", "label", "pid", "bytes"}); err != nil {
		return err
	}
	ts := func(t time.Time) string { return strconv.FormatFloat(unix(t), 'f', 6, 64) }
	u := func(b uint64) string { return strconv.FormatUint(b, 10) }
	for _, s := range samples {
		t := ts(s.Time)
		cw.Write([]string{t, "device_used", "", "", u(s.Used)})
		cw.Write([]string{t, "device_total", "", "", u(s.Total)})
		for _, pid := range slices.Sorted(maps.Keys(s.Procs)) {
			cw.Write([]string{t, "process_gpu", labelOf(pid), strconv.Itoa(pid), u(s.Procs[pid])})
		}
	}
	for _, r := range rss {
		cw.Write([]string{ts(r.Time), "host_rss", r.Label, "", u(r.Bytes)})
	}
	cw.Flush()
	return cw.Error()
}
