package load

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckOpenFiles: a serving concurrency and the harness's reserve must
// fit in the open-file limit (1024 - 256 = 768 requests at ulimit -n
// 1024), else it is refused naming the key, the limit and the largest
// value that fits; an unknown limit refuses nothing.
func TestCheckOpenFiles(t *testing.T) {
	assert.NoError(t, CheckOpenFiles("protocol.concurrency", 768, "at that concurrency", 768, 1024), "768 + 256 = 1024")
	assert.NoError(t, CheckOpenFiles("protocol.concurrency", 1500, "at that concurrency", 1500, 0), "limit unknown")
	err := CheckOpenFiles("protocol.concurrency", 769, "at that concurrency", 769, 1024)
	assert.EqualError(t, err, "protocol.concurrency 769: at that concurrency up to 769 requests are in flight at once, each an open file, "+
		"and the harness needs about 256 more; this process may open 1024 (ulimit -n): lower protocol.concurrency to at most 768, or raise the limit")
	assert.ErrorContains(t, CheckOpenFiles("protocol.concurrency", 300, "at that concurrency", 300, 200), "at most 0,", "a limit below the reserve")
}
