package harness

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// samplesLog streams samples.csv to disk as samples are taken; the harness
// flushes it every second, so a killed harness loses at most the last
// second, and a full disk costs whole rows, never half of one.
type samplesLog struct {
	mu        sync.Mutex
	lf        *lineFile
	buf       bytes.Buffer
	sw        *report.SamplesWriter
	simulated func() bool // read at each flush: the next rows' simulated column
}

func openSamplesLog(path string, simulated func() bool) (*samplesLog, error) {
	lf, err := createLineFile(path, "samples.csv")
	if err != nil {
		return nil, err
	}
	l := &samplesLog{lf: lf, simulated: simulated}
	if l.sw, err = report.NewSamplesWriter(&l.buf, simulated()); err != nil {
		lf.f.Close()
		return nil, fmt.Errorf("samples.csv: %w", err)
	}
	return l, nil
}

func (l *samplesLog) gpu(s gpu.Sample, labelOf func(int) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sw.GPU(s, labelOf)
}

func (l *samplesLog) rss(r record.RSSSample) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sw.RSS(r)
}

// flush writes the rows taken since the last flush.
func (l *samplesLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.sw.Flush() // into memory: cannot fail
	l.lf.write(l.buf.Bytes())
	l.buf.Reset()
	l.sw.SetSimulated(l.simulated())
}

func (l *samplesLog) Close() error {
	l.flush()
	return l.lf.Close()
}

// soakLog streams soak.csv: created at the first soak cycle (a run whose
// soak did not run writes none), then a row written (whole, or not at
// all) as each cycle is recorded, so a disk that fills at cycle 60 keeps
// the rows before it and a killed run keeps every cycle it finished.
type soakLog struct {
	path string
	mu   sync.Mutex // guards lf and err
	lf   *lineFile  // nil until the first cycle
	err  error      // the file could not be created
}

func (l *soakLog) cycle(c record.SoakCycle, simulated bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lf == nil && l.err == nil {
		if l.lf, l.err = createLineFile(l.path, "soak.csv"); l.err == nil {
			l.lf.write(report.SoakCSVHeader())
		}
	}
	if l.lf != nil {
		l.lf.write(report.SoakCSVRow(c, simulated))
	}
}

// Close closes the file; the error says what could not be written.
func (l *soakLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lf == nil {
		return l.err
	}
	return l.lf.Close()
}
