package protocol

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wakebench/wakebench/internal/report"
	"github.com/wakebench/wakebench/internal/server"
	"github.com/wakebench/wakebench/internal/vllm"
	"github.com/wakebench/wakebench/internal/vllmsim"
)

// ErrGarbage means a model answered with the text of uninitialised weights.
var ErrGarbage = errors.New("garbage output (uninitialised weights: was reload_weights skipped after a level-2 wake?)")

func (h *Harness) model(label string) (*model, error) {
	m, ok := h.models[label]
	if !ok {
		return nil, fmt.Errorf("no model labelled %q in the config", label)
	}
	return m, nil
}

// timeout runs f under a deadline and under the server's liveness: if the
// server process exits, f's context ends and the exit is the error.
func (h *Harness) timeout(ctx context.Context, m *model, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if m.srv == nil {
		return fmt.Errorf("server %s is not running", m.cfg.Label)
	}
	err := m.srv.Alive(ctx, f)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v (raise timeouts in the config if that is expected): %w", d, err)
	}
	return h.explain(m, err)
}

// explain puts a server's exit in front of an error it caused: a crash
// shows to the client as a reset or a cut stream a moment before the exit.
func (h *Harness) explain(m *model, err error) error {
	if err == nil || m.srv == nil {
		return err
	}
	select {
	case <-m.srv.Done():
	case <-time.After(300 * time.Millisecond):
		return err
	}
	exit := m.srv.ExitErr()
	if errors.Is(err, exit) || strings.Contains(err.Error(), exit.Error()) {
		return err
	}
	return fmt.Errorf("%w (the client saw: %v)", exit, err)
}

// start spawns the model's server, waits for /health and checks /v1/models.
// It returns spawn → ready.
func (h *Harness) start(ctx context.Context, label string) (ready time.Duration, err error) {
	m, err := h.model(label)
	if err != nil {
		return 0, err
	}
	if m.srv != nil {
		return 0, fmt.Errorf("server %s already running", label)
	}
	if m.port == 0 {
		if m.port, err = freePort(); err != nil {
			return 0, err
		}
	}
	env := h.env
	if m.cfg.SimFaults != "" {
		env = append(slices.Clip(env), vllmsim.EnvFaults+"="+m.cfg.SimFaults)
	}
	spec := server.Spec{
		Label: label, Path: h.cmdPath,
		Args:    server.Argv(m.cfg, h.cfg.Protocol, h.cfg.KVBytes(), h.cfg.Host, m.port),
		Env:     env,
		LogPath: filepath.Join(h.cfg.OutDir, label+".log"),
	}
	srv, err := server.Start(spec)
	if err != nil {
		return 0, err
	}
	h.mu.Lock()
	m.srv, m.asleep, m.level, m.pids = srv, false, 0, []int{srv.PID()}
	h.pidOf[srv.PID()] = label
	h.mu.Unlock()
	m.client = vllm.New("http://"+net.JoinHostPort(h.cfg.Host, strconv.Itoa(m.port)), vllm.WithAPIKey(h.cfg.APIKey))
	var readyAt time.Time
	err = h.timeout(ctx, m, seconds(h.cfg.Timeouts.StartS), func(ctx context.Context) error {
		t, err := m.client.WaitReady(ctx, time.Duration(h.cfg.Timeouts.PollMS*float64(time.Millisecond)))
		readyAt = t
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("start %s (%s): %w; server log: %s", label, m.cfg.Name, err, spec.LogPath)
	}
	ready = readyAt.Sub(srv.Spawned)
	h.refreshPIDs(m)
	h.recordWeights(label, spec.LogPath)
	err = h.timeout(ctx, m, seconds(h.cfg.Timeouts.RequestS), func(ctx context.Context) error {
		ids, err := m.client.Models(ctx)
		if err != nil {
			return err
		}
		if !slices.Contains(ids, m.cfg.Name) {
			return fmt.Errorf("/v1/models lists %v, not %q", ids, m.cfg.Name)
		}
		if v, err := m.client.Version(ctx); err == nil {
			h.Rec.Update(func(r *report.Raw) {
				if r.Simulated == nil && strings.Contains(v, "vllmsim") {
					// A vllmsim binary named by path: still label it simulated.
					r.Simulated = &report.Simulated{Profile: "unknown (set by the server's VLLMSIM_PROFILE)",
						Note: "simulated: the server reports version " + v}
				}
				r.Runtime = runtimeString(v, r.Simulated != nil, h.cuda)
			})
		}
		return nil
	})
	if err != nil {
		return ready, fmt.Errorf("start %s: %w", label, err)
	}
	return ready, nil
}

// recordWeights takes the model's weight size from the "Model loading took
// X GiB" line the server has just logged, for the physical limits.
func (h *Harness) recordWeights(label, logPath string) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return
	}
	if gib, line, ok := vllm.WeightGiB(b); ok {
		h.Rec.Update(func(r *report.Raw) {
			r.Weights[label] = report.Weight{GiB: gib, Source: "server log: " + line}
		})
	}
}

// runtimeString is the report's runtime, e.g. "vLLM 0.31.0 / CUDA 13.0".
func runtimeString(version string, simulated bool, cuda string) string {
	switch {
	case simulated && cuda == "":
		return "vLLM " + version + " (vllmsim) / simulated GPU"
	case simulated:
		return "vLLM " + version + " (vllmsim) / CUDA " + cuda
	case cuda == "":
		return "vLLM " + version
	}
	return "vLLM " + version + " / CUDA " + cuda
}

// stop ends the model's server; nothing of its process group survives.
func (h *Harness) stop(label string, grace time.Duration) error {
	m, err := h.model(label)
	if err != nil {
		return err
	}
	h.mu.Lock()
	srv := m.srv
	h.mu.Unlock()
	if srv == nil {
		return nil
	}
	err = srv.Stop(grace)
	h.mu.Lock()
	m.rssPeak = max(m.rssPeak, srv.PeakRSS())
	m.srv, m.asleep, m.level = nil, false, 0
	h.mu.Unlock()
	return err
}

// probe sends one short streaming request and checks its output; it counts
// as an executed request.
func (h *Harness) probe(ctx context.Context, label string) (*vllm.Stream, error) {
	m, err := h.model(label)
	if err != nil {
		return nil, err
	}
	if m.asleep {
		return nil, fmt.Errorf("probe %s: the harness believes it is asleep; refusing to send inference", label)
	}
	var s *vllm.Stream
	err = h.timeout(ctx, m, seconds(h.cfg.Timeouts.RequestS), func(ctx context.Context) error {
		var err error
		s, err = m.client.Complete(ctx, vllm.CompletionRequest{Model: m.cfg.Name, Prompt: h.cfg.Protocol.Prompt,
			MaxTokens: h.cfg.Protocol.ProbeMaxTokens, IgnoreEOS: true})
		if err == nil {
			err = checkOutput(s)
		}
		return err
	})
	h.Rec.Request(err == nil)
	if err != nil {
		return s, fmt.Errorf("probe %s: %w", label, err)
	}
	return s, nil
}

// sleep puts the model to sleep and confirms it with /is_sleeping. It
// returns the duration of the /sleep call.
func (h *Harness) sleep(ctx context.Context, label string, level int) (time.Duration, error) {
	m, err := h.model(label)
	if err != nil {
		return 0, err
	}
	var d time.Duration
	err = h.timeout(ctx, m, seconds(h.cfg.Timeouts.SleepS), func(ctx context.Context) error {
		t0 := time.Now()
		if err := m.client.Sleep(ctx, level); err != nil {
			return err
		}
		d = time.Since(t0)
		asleep, err := m.client.IsSleeping(ctx)
		if err != nil {
			return err
		}
		if !asleep {
			return fmt.Errorf("/sleep?level=%d answered 200 but /is_sleeping is false", level)
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("sleep %s level %d: %w", label, level, err)
	}
	h.mu.Lock()
	m.asleep, m.level = true, level
	h.mu.Unlock()
	h.Rec.Update(func(r *report.Raw) {
		r.Events = append(r.Events, report.Event{Time: time.Now().Add(-d), Label: label, Kind: fmt.Sprintf("sleep L%d", level)})
	})
	return d, nil
}

// wake wakes the model and confirms it with /is_sleeping. Level 1: one
// /wake_up. Level 2 (vLLM's documented order): wake_up?tags=weights,
// collective_rpc reload_weights, wake_up?tags=kv_cache, reset_prefix_cache.
// It returns the time from the first wake request to the last step's answer.
func (h *Harness) wake(ctx context.Context, label string) (time.Duration, error) {
	m, err := h.model(label)
	if err != nil {
		return 0, err
	}
	level := m.level
	var d time.Duration
	step := "wake_up"
	err = h.timeout(ctx, m, seconds(h.cfg.Timeouts.WakeS), func(ctx context.Context) error {
		t0 := time.Now()
		if level == 2 {
			step = "wake_up?tags=weights"
			if err := m.client.WakeUp(ctx, "weights"); err != nil {
				return err
			}
			step = "collective_rpc reload_weights"
			if _, err := m.client.CollectiveRPC(ctx, "reload_weights"); err != nil {
				return err
			}
			step = "wake_up?tags=kv_cache"
			if err := m.client.WakeUp(ctx, "kv_cache"); err != nil {
				return err
			}
			step = "reset_prefix_cache"
			if err := m.client.ResetPrefixCache(ctx); err != nil {
				return err
			}
		} else if err := m.client.WakeUp(ctx); err != nil {
			return err
		}
		d = time.Since(t0)
		step = "is_sleeping"
		asleep, err := m.client.IsSleeping(ctx)
		if err != nil {
			return err
		}
		if asleep {
			return errors.New("wake answered 200 but /is_sleeping is still true")
		}
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("wake %s from level %d: %s: %w", label, level, step, err)
	}
	h.mu.Lock()
	m.asleep, m.level = false, 0
	h.mu.Unlock()
	h.Rec.Update(func(r *report.Raw) {
		r.Events = append(r.Events, report.Event{Time: time.Now().Add(-d), Label: label, Kind: "wake"})
	})
	return d, nil
}

// running reports whether the model's server is up.
func (h *Harness) running(label string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[label]
	return m != nil && m.srv != nil && m.srv.ExitErr() == nil
}

// makeRoom puts every other awake model to sleep (level 1) so label can
// start or wake: models share the GPU, and vLLM must not sleep or wake one
// instance while another is starting. These sleeps are not measured.
func (h *Harness) makeRoom(ctx context.Context, label string) error {
	for _, o := range h.order {
		if o == label || !h.running(o) || h.models[o].asleep {
			continue
		}
		if _, err := h.sleep(ctx, o, 1); err != nil {
			return fmt.Errorf("make room for %s: %w", label, err)
		}
	}
	return nil
}

// Activate makes label the awake model: its server running (started if
// needed, after the others are asleep), every other model asleep, label
// awake. A server that has died is an error (its exit and log tail), never
// silently restarted; the next Activate starts it afresh.
func (h *Harness) Activate(ctx context.Context, label string) error {
	m, err := h.model(label)
	if err != nil {
		return err
	}
	if m.srv != nil {
		if exit := m.srv.ExitErr(); exit != nil {
			h.stop(label, seconds(h.cfg.Timeouts.StopS))
			return exit
		}
	}
	if err := h.makeRoom(ctx, label); err != nil {
		return err
	}
	if m.srv == nil {
		if _, err := h.start(ctx, label); err != nil {
			return err
		}
		return nil
	}
	if m.asleep {
		if _, err := h.wake(ctx, label); err != nil {
			return err
		}
	}
	return nil
}

// Awake lists the models whose servers run and are awake.
func (h *Harness) Awake() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.order {
		m := h.models[l]
		if m.srv != nil && !m.asleep {
			out = append(out, l)
		}
	}
	return out
}

func join(labels []string) string { return strings.Join(labels, "") }
