package pool

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wakebench/wakebench/internal/record"
)

// TestPinnedBackupCountsEachWorkerOnce: a level-1 sleep backs up each
// tensor-parallel worker's weight shard, so the backup is the weights
// over all workers, counted once. By hand, a 16 GiB model at TP 2 (8 GiB
// a worker, kv_gib 4 a GPU, 0.5 GiB of context and graphs a worker):
// awake it holds 2 × (8 + 4 + 0.5) = 25 GiB; from the log line (one
// worker's 8 GiB) the backup is 16 GiB; without it, 25 − 2 × 4 = 17 GiB
// (the contexts included: an upper bound). Counting the workers twice
// gave (25 − 4) × 2 = 42 GiB, and with 3 GiB of headroom refused a sleep
// that fits in 30.
func TestPinnedBackupCountsEachWorkerOnce(t *testing.T) {
	w := &record.Weight{GiB: 8, Source: "server log: Model loading took 8.0 GiB"}
	gib, how := pinnedBackup(w, 25, 4, 2)
	assert.Equal(t, 16.0, gib, how)
	assert.Contains(t, how, "× 2 tensor-parallel workers")
	gib, how = pinnedBackup(nil, 25, 4, 2)
	assert.Equal(t, 17.0, gib, how)
	assert.Contains(t, how, "every worker's")
	assert.Less(t, gib+3, 30.0, "with 3 GiB headroom it fits in 30 GiB")
	gib, _ = pinnedBackup(&record.Weight{}, 12.5, 4, 1)
	assert.Equal(t, 8.5, gib, "one worker: awake less its KV cache")
	gib, how = pinnedBackup(nil, 0, 4, 2)
	assert.True(t, math.IsNaN(gib), how)
}
