package wakebench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/record"
)

// stopSignals receives the signals that stop a run (Ctrl-C, SIGTERM,
// SIGHUP) from the run's start until its last output is written: the
// first cancels the run (its cause, record.Stopped, names it), every later
// one is absorbed and noted, so a CI system's second signal while the
// servers stop (GitHub Actions sends SIGINT, then SIGTERM 7.5 s later)
// does not kill the run before its report. Only SIGKILL ends it at once.
type stopSignals struct {
	ch   chan os.Signal
	done chan struct{} // closed when watch returns

	mu    sync.Mutex  // guards first and later
	first os.Signal   // the signal that stopped the run
	later []os.Signal // each one after it, absorbed
}

// signalWatcher is stopSignals' goroutine, alive until the run's end:
// goleak, run before the report is written, leaves it out.
const signalWatcher = "github.com/wakebench/wakebench.(*stopSignals).watch"

// watchSignals starts receiving the stop signals; the first cancels the
// run with cancel.
func watchSignals(cancel context.CancelCauseFunc) *stopSignals {
	s := &stopSignals{ch: make(chan os.Signal, 4), done: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go s.watch(cancel)
	return s
}

func (s *stopSignals) watch(cancel context.CancelCauseFunc) {
	defer close(s.done)
	for sig := range s.ch {
		s.mu.Lock()
		first := s.first
		if first == nil {
			s.first = sig
		} else {
			s.later = append(s.later, sig)
		}
		s.mu.Unlock()
		if first == nil {
			fmt.Fprintf(os.Stderr, "wakebench: %v: stopping the run (every server is stopped and every output written; a further signal is absorbed, only SIGKILL ends the run at once)\n", sig)
			cancel(record.Stopped{Reason: stoppedBy(sig)})
			continue
		}
		fmt.Fprintf(os.Stderr, "wakebench: %v received while the run stops (%v stopped it): absorbed; stopping every server and writing every output goes on\n", sig, first)
	}
}

// stoppedBy is the cause a signal gives the run.
func stoppedBy(sig os.Signal) string { return fmt.Sprintf("interrupted by %v", sig) }

// failures are what the report adds about the signals received so far,
// given the failures recorded: the first signal where no phase recorded it
// (it came after the phases ended), and the later ones, absorbed.
func (s *stopSignals) failures(recorded []record.Failure) []record.Failure {
	s.mu.Lock()
	first, later := s.first, slices.Clone(s.later)
	s.mu.Unlock()
	if first == nil {
		return nil
	}
	var out []record.Failure
	if !slices.ContainsFunc(recorded, func(f record.Failure) bool { return strings.Contains(f.Error, stoppedBy(first)) }) {
		out = append(out, record.Failure{Phase: "run", Error: stoppedBy(first) +
			" after the phases had ended (or been stopped otherwise): the run went on stopping its servers and writing every output"})
	}
	if len(later) > 0 {
		names := make([]string, len(later))
		for i, sig := range later {
			names[i] = sig.String()
		}
		out = append(out, record.Failure{Phase: "run", Error: fmt.Sprintf(
			"%s received while the run stopped (after %v, which stopped it): absorbed; the run went on stopping its servers and writing every output (only SIGKILL ends a run at once)",
			strings.Join(names, ", "), first)})
	}
	return out
}

// stop ends the watch: signals get their default action again. Call it
// once the last output is written.
func (s *stopSignals) stop() {
	signal.Stop(s.ch)
	close(s.ch)
	<-s.done
}

// TestSignalFailures: what the report adds about the signals a run
// received: nothing where the phases recorded the first one and none
// followed; the later ones, absorbed, after it; and the first one itself
// where it came after the phases ended (no phase recorded it).
func TestSignalFailures(t *testing.T) {
	if os.Getenv("WAKEBENCH_CHILD") != "" {
		t.Skip("this is a child run")
	}
	stopped := []record.Failure{{Phase: "sleep-level1", Step: "run stopped during cycle 3", Error: "interrupted by interrupt"}}
	assert.Empty(t, (&stopSignals{}).failures(nil), "no signal")
	assert.Empty(t, (&stopSignals{first: os.Interrupt}).failures(stopped), "the phases named it")

	got := (&stopSignals{first: os.Interrupt, later: []os.Signal{syscall.SIGTERM, syscall.SIGHUP}}).failures(stopped)
	require.Len(t, got, 1)
	assert.Equal(t, "run", got[0].Phase)
	assert.Equal(t, "terminated, hangup received while the run stopped (after interrupt, which stopped it): absorbed; the run went on stopping its servers and writing every output (only SIGKILL ends a run at once)", got[0].Error)

	got = (&stopSignals{first: syscall.SIGTERM}).failures(nil)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Error, "interrupted by terminated after the phases had ended")
}
