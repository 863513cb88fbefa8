package harness

import (
	"fmt"
	"os"
)

// lineFile is a file written in whole lines: a write that fails part-way
// (a full disk) is cut back to the last whole line, and the harness counts
// what it could not write instead of leaving a half line behind.
type lineFile struct {
	name string // as the error names it, e.g. "metrics.jsonl"
	f    *os.File
	size int64 // bytes written whole
	lost int   // writes (lines or batches of lines) not written
	err  error // the first write error
}

func createLineFile(path, name string) (*lineFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &lineFile{name: name, f: f}, nil
}

// write appends b (whole lines) or nothing.
func (l *lineFile) write(b []byte) {
	if len(b) == 0 {
		return
	}
	n, err := l.f.Write(b)
	if err == nil {
		l.size += int64(n)
		return
	}
	l.lost++
	if l.err == nil {
		l.err = err
	}
	if n > 0 { // cut the half line
		_ = l.f.Truncate(l.size)
		_, _ = l.f.Seek(l.size, 0)
	}
}

// Close closes the file; the error says how many writes were lost and why.
func (l *lineFile) Close() error {
	err := l.f.Close()
	if l.err != nil {
		return fmt.Errorf("%s: %d write(s) lost, the file holds only whole lines before the first: %w", l.name, l.lost, l.err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", l.name, err)
	}
	return nil
}
