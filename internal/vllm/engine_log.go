package vllm

import (
	"regexp"
	"strconv"
)

// EngineLog is what a server logged of its own sleeps and wakes
// (executor_base.py / abstract.py and gpu_worker.py, vLLM 0.6 on):
//
//	It took %.6f seconds to fall asleep.
//	It took %.6f seconds to wake up tags %s.
//	Sleep mode freed %.2f GiB memory, %.2f GiB memory is still in use.
//
// With tensor parallelism each worker logs its own "freed" line; the
// executor logs one "It took" line per call.
type EngineLog struct {
	SleepS []float64 // one per /sleep
	WakeS  []float64 // one per /wake_up (a level-2 wake makes two)
	// FreedGiB and InUseGiB are each worker's figures, read from the
	// device's free memory before and after the sleep (all processes on
	// the device count in InUseGiB).
	FreedGiB []float64
	InUseGiB []float64
}

var (
	fellAsleep = regexp.MustCompile(`It took ([0-9.]+(?:e[-+]?[0-9]+)?) seconds to fall asleep`)
	wokeUp     = regexp.MustCompile(`It took ([0-9.]+(?:e[-+]?[0-9]+)?) seconds to wake up tags`)
	freed      = regexp.MustCompile(`Sleep mode freed ([0-9.]+) GiB memory, ([0-9.]+) GiB memory is still in use`)
)

// ParseEngineLog reads the sleep and wake lines of a stretch of server log.
func ParseEngineLog(log []byte) EngineLog {
	var e EngineLog
	all := func(re *regexp.Regexp, group int) []float64 {
		var out []float64
		for _, m := range re.FindAllSubmatch(log, -1) {
			if v, err := strconv.ParseFloat(string(m[group]), 64); err == nil {
				out = append(out, v)
			}
		}
		return out
	}
	e.SleepS, e.WakeS = all(fellAsleep, 1), all(wokeUp, 1)
	e.FreedGiB, e.InUseGiB = all(freed, 1), all(freed, 2)
	return e
}

// SleepOp is vLLM's histogram of sleep-mode calls,
// vllm:rl_sleep_mode_operation_duration_seconds{operation=op} (PR #52864,
// v0.32 on; docs/vllm-api.md §7.3), or branch code's unprefixed
// vllm:sleep_mode_operation_duration_seconds: its sum and count; false
// when the server exports neither (v0.31 and older).
func (m Metrics) SleepOp(op string) (sum, count float64, ok bool) {
	for _, name := range []string{"vllm:sleep_mode_operation_duration_seconds", "vllm:rl_sleep_mode_operation_duration_seconds"} {
		s, okS := m[name+`_sum{operation="`+op+`"}`]
		c, okC := m[name+`_count{operation="`+op+`"}`]
		if okS && okC {
			return s, c, true
		}
	}
	return 0, 0, false
}
