package simgpu

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Power is the simulated device's power model, in watts. These are
// simulated figures, not measurements: rounded estimates of what NVML's
// power counter shows for a board of this class, enough for wakebench's
// energy arithmetic to have something with a physical meaning to add up.
// Every process figure is what that process adds on top of the board idle.
type Power struct {
	// BoardIdleW is the board with no CUDA context on it (deepest
	// performance state); it is drawn whether any server runs or not.
	BoardIdleW float64 `json:"board_idle_w"`
	// ContextW is what a process adds while it holds a CUDA context and
	// nothing else is mapped: a server asleep (level 1 or 2). A context
	// keeps the GPU out of its deepest idle state.
	ContextW float64 `json:"context_w"`
	// AwakeIdleW is what an awake server adds with its weights and KV
	// cache mapped and no request running.
	AwakeIdleW float64 `json:"awake_idle_w"`
	// DecodeW is what a server adds while it runs engine steps (prefill
	// or decode).
	DecodeW float64 `json:"decode_w"`
}

// State is a simulated server's power state.
type State string

// The power states of a simulated server process.
const (
	Stopped   State = "stopped"    // no process: 0 W (Power's figures are per live process)
	Asleep    State = "asleep"     // CUDA context held, weights and KV cache released (level 1 or 2)
	AwakeIdle State = "awake-idle" // weights and KV cache mapped, no request running
	Decoding  State = "decoding"   // engine steps running
)

// Watts is what a process in state st adds to the board idle under p.
func (p Power) Watts(st State) (float64, error) {
	switch st {
	case Stopped:
		return 0, nil
	case Asleep:
		return p.ContextW, nil
	case AwakeIdle:
		return p.AwakeIdleW, nil
	case Decoding:
		return p.DecodeW, nil
	}
	return 0, fmt.Errorf("simgpu: unknown power state %q", st)
}

// DefaultPower is the simulated power model of the devices vllmsim's
// profiles name, false for a device it does not know (its energy counter
// then counts only what processes set with Meter.Set).
//
// NVIDIA L20: 275 W board power limit (datasheet); the idle, context and
// awake figures are round estimates in the range nvidia-smi shows for
// Ada data-centre boards idle and with a CUDA context, not measured here.
// "Tiny Sim GPU" is fictional, as its profile says; its numbers are small
// round ones.
func DefaultPower(deviceName string) (Power, bool) {
	p, ok := map[string]Power{
		"NVIDIA L20":   {BoardIdleW: 30, ContextW: 25, AwakeIdleW: 45, DecodeW: 220},
		"Tiny Sim GPU": {BoardIdleW: 10, ContextW: 5, AwakeIdleW: 10, DecodeW: 50},
	}[deviceName]
	return p, ok
}

// powerRecord is one power file: a process's (or, with PID 0, the
// board's) power draw since a moment, and the energy it drew before that.
type powerRecord struct {
	PID    int     `json:"pid"`
	Model  string  `json:"model,omitempty"`
	State  string  `json:"state"`
	Watts  float64 `json:"watts"`
	Since  int64   `json:"since_unix_ns"` // wall clock: the processes share no other
	Joules float64 `json:"joules"`        // drawn before Since
}

// at is the record's energy at now: Joules + Watts × (now − Since), no
// less than Joules for a now before Since.
func (r powerRecord) at(now time.Time) float64 {
	dt := max(0, float64(now.UnixNano()-r.Since)/1e9)
	return r.Joules + r.Watts*dt
}

const boardPID = 0

func powerPath(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("power-%d.json", pid))
}

// startBoard starts the board's own energy record at now: BoardIdleW from
// now on, for as long as the device directory exists.
func startBoard(dir string, p Power, now time.Time) error {
	return writeJSON(powerPath(dir, boardPID), powerRecord{PID: boardPID, State: "board-idle", Watts: p.BoardIdleW, Since: now.UnixNano()})
}

// Meter is one process's power on the simulated device: the process sets
// its current draw at every change of state, and the device's energy
// counter (Energy) integrates it. Its record outlives the process, so the
// counter never goes back, as NVML's total energy does not.
type Meter struct {
	dir string

	// mu guards rec and the writes of its file: a server changes state
	// from several goroutines (requests, sleep, wake).
	mu  sync.Mutex
	rec powerRecord
}

// NewMeter starts the power record of process pid (serving model) on the
// device in dir at 0 W, in state Stopped, from now. A pid that had a record
// before (a reused pid) keeps its energy: the counter is the device's.
func NewMeter(dir string, pid int, model string, now time.Time) (*Meter, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("simgpu: meter for pid %d", pid)
	}
	m := &Meter{dir: dir, rec: powerRecord{PID: pid, Model: model, State: string(Stopped), Since: now.UnixNano()}}
	if old, err := readPower(powerPath(dir, pid)); err == nil {
		m.rec.Joules = old.at(now)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m, m.writeLocked()
}

// Set records that the process draws watts (above the board idle) from now
// on, in a state named by label (e.g. string(Asleep)): the energy drawn at
// the previous draw up to now is added to the process's total. This is the
// simulated device's `SetPower`.
func (m *Meter) Set(label string, watts float64, now time.Time) error {
	if watts < 0 {
		return fmt.Errorf("simgpu: negative power %g W for %s", watts, label)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rec.Joules = m.rec.at(now)
	m.rec.State, m.rec.Watts = label, watts
	m.rec.Since = max(m.rec.Since, now.UnixNano())
	return m.writeLocked()
}

// SetState is Set with state's watts under the power model p.
func (m *Meter) SetState(p Power, st State, now time.Time) error {
	w, err := p.Watts(st)
	if err != nil {
		return err
	}
	return m.Set(string(st), w, now)
}

func (m *Meter) writeLocked() error {
	if err := writeJSON(powerPath(m.dir, m.rec.PID), m.rec); err != nil {
		return fmt.Errorf("simgpu: power of pid %d: %w", m.rec.PID, err)
	}
	return nil
}

// Energy is the simulated device's energy counter at now, in joules since
// the device was created: the board idle over that time plus every
// process's Σ watts × dt, where dt is wall-clock time (so under vllmsim's
// time scale the counter runs at the same scale as the run's times). A
// process that died is taken to draw 0 W from the first read that finds it
// gone; its energy stays in the counter.
func Energy(dir string, now time.Time) (float64, error) {
	files, err := pidFiles(dir, "power-")
	if err != nil {
		return 0, fmt.Errorf("simgpu: energy: %w", err)
	}
	var j float64
	for _, f := range files {
		pid, name := f.pid, f.name
		r, err := readPower(filepath.Join(dir, name))
		if err != nil {
			return 0, fmt.Errorf("simgpu: energy: %w", err)
		}
		if pid != boardPID && r.Watts > 0 && !alive(pid) {
			// Freeze a dead process at 0 W from now (idempotent enough: two
			// readers racing here differ by the time between their reads).
			r = powerRecord{PID: r.PID, Model: r.Model, State: string(Stopped), Since: now.UnixNano(), Joules: r.at(now)}
			if err := writeJSON(filepath.Join(dir, name), r); err != nil {
				return 0, fmt.Errorf("simgpu: energy: stop dead pid %d: %w", pid, err)
			}
		}
		j += r.at(now)
	}
	return j, nil
}

func readPower(path string) (powerRecord, error) {
	var r powerRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	return r, nil
}
