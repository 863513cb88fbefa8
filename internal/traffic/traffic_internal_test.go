package traffic

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCheckOpenFiles: the requests in flight at once (at most
// max_in_flight, at most every arrival) and the harness's reserve must fit
// in the open-file limit, else the plan is refused naming the key and the
// largest bound that fits; an unknown limit refuses nothing.
func TestCheckOpenFiles(t *testing.T) {
	assert.NoError(t, checkOpenFiles(1024, 5000, 4096), "1024 + 256 ≤ 4096")
	assert.NoError(t, checkOpenFiles(8000, 100, 4096), "only 100 arrivals: 100 in flight at most")
	assert.NoError(t, checkOpenFiles(8000, 5000, 0), "limit unknown")
	err := checkOpenFiles(8000, 5000, 4096)
	assert.ErrorContains(t, err, "traffic.max_in_flight 8000: with 5000 arrivals up to 5000 requests are in flight at once")
	assert.ErrorContains(t, err, "lower traffic.max_in_flight to at most 3840")
	assert.Error(t, checkOpenFiles(3841, 5000, 4096))
	assert.NoError(t, checkOpenFiles(3840, 5000, 4096))
}
