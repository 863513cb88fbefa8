package vllmsim

import (
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/simgpu"
)

// power is the server's draw on the simulated GPU's energy counter
// (simgpu.Meter): a state derived from the server's own state at every
// change (power.sync), so racing updates (the engine going idle, a sleep
// finishing) always leave the latest state's draw.
type power struct {
	model simgpu.Power // the device's power model (zero: the device has none)
	has   bool         // the device has a power model

	mu      sync.Mutex // guards meter, stopped and the order of the meter's writes
	meter   *simgpu.Meter
	stopped bool // the process is going away: nothing but Stopped from now on
}

// newPower starts the process's meter on the device in dir; a device
// without a power model, or a meter that cannot be written, leaves a
// power whose syncs do nothing (logged by the caller).
func newPower(dir string, pid int, model string, info simgpu.Device) (*power, error) {
	p := &power{}
	if info.Power == nil {
		return p, nil
	}
	m, err := simgpu.NewMeter(dir, pid, model, time.Now())
	if err != nil {
		return p, err
	}
	p.model, p.has, p.meter = *info.Power, true, m
	return p, nil
}

// starting is the draw while the weights load: the CUDA context exists,
// nothing is mapped yet, so the context's watts, under a label of its own.
func (p *power) starting() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meter == nil || p.stopped {
		return nil
	}
	return p.meter.Set("starting", p.model.ContextW, time.Now())
}

// stop records Stopped for good (the process is exiting).
func (p *power) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meter == nil || p.stopped {
		return nil
	}
	p.stopped = true
	return p.meter.SetState(p.model, simgpu.Stopped, time.Now())
}

// powerState is the server's power state now: asleep while the weights
// are released (levels 1 and 2: only the CUDA context is held), decoding
// while engine steps run, else awake and idle. A level-0 sleep (pause
// only) and a KV-only release keep the weights mapped: awake idle, as
// simgpu.Power's AwakeIdleW is a server with its weights mapped and no
// request running.
func (s *server) powerState() simgpu.State {
	s.mu.Lock()
	weightsAsleep := s.weightsAsleep
	s.mu.Unlock()
	switch {
	case weightsAsleep:
		return simgpu.Asleep
	case s.eng.stepping.Load():
		return simgpu.Decoding
	}
	return simgpu.AwakeIdle
}

// syncPower sets the meter to the server's power state now. The state is
// read under power.mu's turn, so the last sync always writes the latest.
func (s *server) syncPower() {
	if s.power == nil || !s.power.has {
		return
	}
	s.power.mu.Lock()
	defer s.power.mu.Unlock()
	if s.power.stopped || s.power.meter == nil {
		return
	}
	st := s.powerState()
	if err := s.power.meter.SetState(s.power.model, st, time.Now()); err != nil {
		s.log.Printf("ERROR simulated GPU power: %v", err)
	}
}
