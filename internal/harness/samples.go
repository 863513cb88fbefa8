package harness

import (
	"bufio"
	"fmt"
	"os"
	"sync"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
	"github.com/wakebench/wakebench/internal/report"
)

// samplesLog streams samples.csv to disk as samples are taken; the harness
// flushes it every second, so a killed harness loses at most the last second.
type samplesLog struct {
	mu sync.Mutex
	f  *os.File
	bw *bufio.Writer
	sw *report.SamplesWriter
}

func openSamplesLog(path string) (*samplesLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("samples: %w", err)
	}
	bw := bufio.NewWriter(f)
	sw, err := report.NewSamplesWriter(bw)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("samples: %w", err)
	}
	return &samplesLog{f: f, bw: bw, sw: sw}, nil
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

func (l *samplesLog) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.sw.Flush(); err != nil {
		return fmt.Errorf("samples.csv: %w", err)
	}
	if err := l.bw.Flush(); err != nil {
		return fmt.Errorf("samples.csv: %w", err)
	}
	return nil
}

func (l *samplesLog) Close() error {
	err := l.flush()
	if cerr := l.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("samples.csv: %w", cerr)
	}
	return err
}
