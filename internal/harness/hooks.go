package harness

import (
	"fmt"
	"strconv"
	"time"
)

// EnvReadDelay names the environment variable of Hooks.ReadDelay, in
// seconds: a test's, never a user's (the whole-run figure test,
// figures_test.go, sets it in the runs it starts).
const EnvReadDelay = "WAKEBENCH_TEST_READ_DELAY_S"

// Hooks change how a run does its own work, for the tests that prove a
// figure leaves that work out. The zero value is a normal run.
type Hooks struct {
	// ReadDelay makes every read of the harness's own take this much
	// longer: GPU memory reads (gpu.Late), process scans, process-tree
	// memory reads and server-log parses (pool.Options.ReadDelay). The
	// server's read-only endpoints are slowed on the server's side
	// (vllmsim's delay=PATH:S, simtest.ReadsLate).
	ReadDelay time.Duration
}

// HooksFromEnv reads the hooks a test set in the environment (getenv,
// e.g. os.Getenv); none set is the zero Hooks.
func HooksFromEnv(getenv func(string) string) (Hooks, error) {
	v := getenv(EnvReadDelay)
	if v == "" {
		return Hooks{}, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s >= 0) || s > 60 {
		return Hooks{}, fmt.Errorf("%s=%q: want seconds from 0 to 60", EnvReadDelay, v)
	}
	return Hooks{ReadDelay: time.Duration(s * float64(time.Second))}, nil
}
