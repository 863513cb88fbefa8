package vllmsim

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// SyncLog is a log the server writes while the test reads it; the
// external tests use it too (a test-only export).
type SyncLog struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *SyncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *SyncLog) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func (l *SyncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// has asserts that the server logged want. The server writes a line before
// it answers the request that caused it, but the line reaches this buffer
// through exec's copying goroutine, which a busy machine may run after the
// answer arrived: so has waits for the line (up to 10 s) instead of
// reading the buffer once.
func (l *SyncLog) Has(t *testing.T, want string, msgAndArgs ...any) bool {
	t.Helper()
	if strings.Contains(l.String(), want) {
		return true
	}
	if assert.Eventually(t, func() bool { return strings.Contains(l.String(), want) }, 10*time.Second, 5*time.Millisecond, msgAndArgs...) {
		return true
	}
	return assert.Contains(t, l.String(), want, msgAndArgs...)
}
