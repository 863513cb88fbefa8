package load

import (
	"fmt"
	"syscall"
)

// FileReserve is the open files the harness needs beside the requests in
// flight: server logs, samples.csv and metrics.jsonl, the probes' and
// reads' connections, the runtime's own.
const FileReserve = 256

// OpenFileLimit is the process's open-file limit (RLIMIT_NOFILE, whose
// soft limit Go raises to the hard one at start); 0 where it cannot say.
func OpenFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}

// CheckOpenFiles refuses inFlight requests at once that do not fit, with
// FileReserve, in limit open files (0: unknown): each request holds a
// connection, an open file, and past the limit requests fail (at issue 48,
// 489 of a concurrency of 1500 under ulimit -n 1024, after the servers had
// started). key is the setting whose value is setting, what makes inFlight
// requests of it (e.g. "with 5000 arrivals").
func CheckOpenFiles(key string, setting int, what string, inFlight int, limit uint64) error {
	if limit == 0 || uint64(inFlight)+FileReserve <= limit {
		return nil
	}
	return fmt.Errorf("%s %d: %s up to %d requests are in flight at once, each an open file, and the harness needs about %d more; this process may open %d (ulimit -n): lower %s to at most %d, or raise the limit",
		key, setting, what, inFlight, FileReserve, limit, key, max(int(limit)-FileReserve, 0))
}
