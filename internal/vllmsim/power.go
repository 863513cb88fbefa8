package vllmsim

import (
	"errors"
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

	mu      sync.Mutex // guards meter, more, stopped and the order of the meters' writes
	meter   *simgpu.Meter
	more    []*simgpu.Meter // a model across GPUs: ranks 1… on theirs, each drawing as rank 0 does
	stopped bool            // the process is going away: nothing but Stopped from now on
}

// setState sets every meter to st. Caller holds p.mu.
func (p *power) setState(st simgpu.State) error {
	now := time.Now()
	err := p.meter.SetState(p.model, st, now)
	for _, m := range p.more {
		err = errors.Join(err, m.SetState(p.model, st, now))
	}
	return err
}

// addRank starts a meter for a rank of a model across GPUs: its worker's
// pid on its GPU's directory (same product, same power model).
func (p *power) addRank(dir string, pid int, model string) error {
	if p == nil { // real-device mode: no simulated meter
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.has {
		return nil
	}
	m, err := simgpu.NewMeter(dir, pid, model, time.Now())
	if err != nil {
		return err
	}
	p.more = append(p.more, m)
	return nil
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
	if p == nil { // real-device mode: no simulated meter
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meter == nil || p.stopped {
		return nil
	}
	now := time.Now()
	err := p.meter.Set("starting", p.model.ContextW, now)
	for _, m := range p.more {
		err = errors.Join(err, m.Set("starting", p.model.ContextW, now))
	}
	return err
}

// stop records Stopped for good (the process is exiting).
func (p *power) stop() error {
	if p == nil { // real-device mode: no simulated meter
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.meter == nil || p.stopped {
		return nil
	}
	p.stopped = true
	return p.setState(simgpu.Stopped)
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
	if err := s.power.setState(st); err != nil {
		s.log.Printf("ERROR simulated GPU power: %v", err)
	}
}
