package simgpu

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is a fixed wall-clock origin: every energy below is hand-computed
// from offsets to it.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestEnergyIntegratesPowerStates: a server that is awake and idle for 2 s,
// decodes for 1 s, sleeps for 4 s, on a board idling at 30 W: the counter
// is Σ watts × dt of each state plus the board's.
func TestEnergyIntegratesPowerStates(t *testing.T) {
	dir := t.TempDir()
	p := Power{BoardIdleW: 30, ContextW: 25, AwakeIdleW: 45, DecodeW: 220}
	require.NoError(t, create(dir, Device{Name: "G", TotalBytes: 1 << 30, Power: &p}, t0))
	m, err := NewMeter(dir, os.Getpid(), "m", at(0))
	require.NoError(t, err)
	// Each step: a change of state at a time, then a read of the counter
	// (readings go forward in time, as a sampler's do).
	steps := []struct {
		state     State
		at, read  float64
		wantJoule float64
	}{
		{AwakeIdle, 0, 0, 0},
		{AwakeIdle, 0, 1, 30*1 + 45*1},
		{Decoding, 2, 2.5, 30*2.5 + 45*2 + 220*0.5},
		{Asleep, 3, 7, 30*7 + 45*2 + 220*1 + 25*4},
	}
	for _, s := range steps {
		require.NoError(t, m.SetState(p, s.state, at(s.at)))
		j, err := Energy(dir, at(s.read))
		require.NoError(t, err)
		assert.InDelta(t, s.wantJoule, j, 1e-6, "%s from %g s, read at %g s", s.state, s.at, s.read)
	}
	// The power of a state over a dwell is the counter's delta over it: the
	// sleeping server's 25 W above the board's 30 W.
	a, _ := Energy(dir, at(7))
	b, _ := Energy(dir, at(7.5))
	assert.InDelta(t, 55, (b-a)/0.5, 1e-6)

	require.NoError(t, m.SetState(p, Stopped, at(8)))
	j, err := Energy(dir, at(9))
	require.NoError(t, err)
	assert.InDelta(t, 30*9+45*2+220*1+25*5, j, 1e-6, "a stopped server adds nothing, and keeps what it drew")
	_, err = p.Watts("warp")
	assert.Error(t, err)
	assert.Error(t, m.Set("x", -1, at(9)))
}

// TestEnergyOfADeadProcessStays: a process killed while decoding draws
// nothing from the first read that finds it gone, and its energy stays in
// the counter (NVML's never goes back).
func TestEnergyOfADeadProcessStays(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, create(dir, Device{Name: "G", TotalBytes: 1 << 30}, t0))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	m, err := NewMeter(dir, cmd.Process.Pid, "m", at(0))
	require.NoError(t, err)
	require.NoError(t, m.Set(string(Decoding), 100, at(0)))
	j, err := Energy(dir, at(2))
	require.NoError(t, err)
	assert.InDelta(t, 200, j, 1e-6, "up to the read that finds it dead")
	j, err = Energy(dir, at(10))
	require.NoError(t, err)
	assert.InDelta(t, 200, j, 1e-6, "nothing after")

	// Its pid reused by a new server: the device's counter keeps counting up.
	m2, err := NewMeter(dir, cmd.Process.Pid, "m2", at(10))
	require.NoError(t, err)
	require.NoError(t, m2.Set(string(Asleep), 5, at(10)))
	j, _ = Energy(dir, at(10))
	assert.InDelta(t, 200, j, 1e-6)
}

func TestCreateFillsKnownPower(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, create(dir, Device{Name: "NVIDIA L20", TotalBytes: 48 << 30}, t0))
	d, err := ReadDevice(dir)
	require.NoError(t, err)
	require.NotNil(t, d.Power)
	assert.Equal(t, 30.0, d.Power.BoardIdleW)
	j, err := Energy(dir, at(10))
	require.NoError(t, err)
	assert.InDelta(t, 300, j, 1e-6, "the board idles at 30 W with no server")

	dir = t.TempDir()
	require.NoError(t, create(dir, Device{Name: "unknown", TotalBytes: 1 << 30}, t0))
	j, err = Energy(dir, at(10))
	require.NoError(t, err)
	assert.Zero(t, j, "no power model: nothing drawn but what processes set")
}
