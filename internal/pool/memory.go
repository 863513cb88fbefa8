package pool

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/wakebench/wakebench/internal/gpu"
	"github.com/wakebench/wakebench/internal/record"
)

// Memory measures the models' GPU memory around their starts and sleeps
// from the pool's memory source (Options.Sampler): per process where the
// source lists a model's processes, else by the device's change since just
// before its spawn ("device-delta": only one model changes state at a
// time). It returns what it measured and records nothing: the caller
// records releases, notes and attributions. Its reads stay outside every
// measured interval.
type Memory struct{ f *Pool }

// memories is what Memory knows of each model's memory, shared by every
// view of a pool.
type memories struct {
	mu sync.Mutex           // guards every memState in by (the map is fixed after New); never held with servers.mu
	by map[string]*memState // by model label
}

// memState is one model's memory as Memory last measured it.
type memState struct {
	// Device-delta attribution, for a memory source that lists none of the
	// server's processes: each GPU's used bytes just before the server was
	// spawned (every other model asleep; nil when not read), and the
	// model's awake footprint read from them after the start, in all and
	// per GPU (nil when unknown). Replaced whole, never changed in place.
	deviceBeforeGPU []uint64
	footprint       float64 // GiB
	footprintGPU    []float64
	// awakeGiB is the model's memory before its last measured sleep (or
	// its footprint after its start): what a wake must find free.
	awakeGiB float64
	// attribution is how the last start's footprint was measured:
	// "process", "device-delta" or "" (not measured).
	attribution string
}

// state runs fn on label's memory state under memories.mu.
func (mm Memory) state(label string, fn func(*memState)) {
	mem := mm.f.s.mem
	mem.mu.Lock()
	defer mem.mu.Unlock()
	if st := mem.by[label]; st != nil {
		fn(st)
	}
}

// Attribution is how label's memory figures are attributed since its last
// start: "process", "device-delta", or "" when not measured.
func (mm Memory) Attribution(label string) (how string) {
	mm.state(label, func(st *memState) { how = st.attribution })
	return how
}

// beforeSpawn reads each GPU's used memory just before label's server is
// spawned (every other model asleep), for device-delta attribution.
func (mm Memory) beforeSpawn(ctx context.Context, label string) {
	var before []uint64
	if smp := mm.f.s.opt.Sampler; smp != nil {
		if d, err := smp.SampleNow(ctx); err == nil {
			before = usedPerGPU(d)
		}
	}
	mm.state(label, func(st *memState) { st.deviceBeforeGPU, st.footprintGPU = before, nil })
}

// footprint reads the device once a started model is up (after its first
// token, outside any measured interval) and settles how its memory is
// attributed (Attribution). Pool.Started calls it.
func (mm Memory) footprint(ctx context.Context, label string) error {
	s := mm.f.s
	m, err := s.model(label)
	if err != nil || s.opt.Sampler == nil {
		return err
	}
	if srv, _ := s.server(m); srv == nil {
		return nil
	}
	s.refreshPIDs(m)
	smp, err := s.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return err
	}
	if gib, found := modelGiB(s.pids(m), smp); found {
		mm.state(label, func(st *memState) { st.awakeGiB, st.attribution = gib, "process" })
		return nil
	}
	mm.state(label, func(st *memState) {
		before := st.deviceBeforeGPU
		if before == nil || smp.Used < sum(before) {
			return
		}
		now := usedPerGPU(smp)
		perGPU := make([]float64, 0, len(now))
		for i := range min(len(now), len(before)) {
			perGPU = append(perGPU, max(0, float64(now[i])-float64(before[i]))/record.GiB)
		}
		st.footprint, st.footprintGPU = float64(smp.Used-sum(before))/record.GiB, perGPU
		st.awakeGiB, st.attribution = st.footprint, "device-delta"
	})
	return nil
}

// Headroom is the device's free memory now and label's awake footprint
// (the memory it held before its last measured sleep, else its footprint
// after its start), in GiB; need is NaN when not known.
func (mm Memory) Headroom(ctx context.Context, label string) (free, need float64, err error) {
	if _, err := mm.f.s.model(label); err != nil {
		return math.NaN(), math.NaN(), err
	}
	smp := mm.f.s.opt.Sampler
	if smp == nil {
		return math.NaN(), math.NaN(), nil
	}
	s, err := smp.SampleNow(ctx)
	if err != nil {
		return math.NaN(), math.NaN(), err
	}
	mm.state(label, func(st *memState) { need = st.awakeGiB })
	if need == 0 {
		need = math.NaN()
	}
	return float64(freeBytes(s.Reading)) / record.GiB, need, nil
}

// MeasuredSleep is a sleep with the model's GPU memory read just before it
// (Memory.Before) and once asleep (Finish): the reads (a process scan,
// a device read) stay outside the measured interval, which starts at Sent.
// Finish sets what it measured; the caller records it.
type MeasuredSleep struct {
	Label string        // the model
	Level int           // the sleep level
	Sent  time.Time     // /sleep sent
	Took  time.Duration // /sleep sent → answered
	T     *Transition   // the sleep, once sent (nil before)
	// Held is the harness's own work between the sleep's answer and
	// Asleep's return: the verification reads (/is_sleeping, the sleep
	// metrics) and, in device-delta mode, the device's memory read that
	// must follow the sleep before any other model changes state.
	// An interval from Sent that runs on past the sleep leaves it out.
	Held time.Duration

	// Set by Finish:
	// ReleasedGiB is what the sleep released of the model's memory (NaN
	// when unknown).
	ReleasedGiB float64
	// ReleasePercent is the percent of the model's awake memory a level-1
	// sleep released (NaN at level 2 or when unknown).
	ReleasePercent float64
	// ResidualPerGPU is the memory left asleep on each GPU, and
	// ReleasePercentPerGPU (level 1) the percent each released, on a run
	// of more than one GPU (nil otherwise).
	ResidualPerGPU, ReleasePercentPerGPU []float64
	// Note says why the residual and release are absent (the memory
	// source listed none of the model's processes); "" when they are not.
	Note string

	mem Memory
	m   *model
	// before is the model's memory just before the sleep; found says
	// whether the source listed any of its processes (read says it read).
	before      float64
	found, read bool
	// Device-delta mode (the source lists none of its processes): each
	// GPU's used bytes before and once asleep, read at once after the
	// sleep (before another model changes state: a handoff's wake) and
	// again by Finish if no model has changed state since (changes): a
	// release the device shows only after /sleep answered is counted.
	delta                          bool
	deviceBeforeGPU, deviceLeftGPU []uint64
	changes                        uint64 // the pool's changes after this sleep
	// beforeGPU is the model's memory on each GPU before (process mode).
	beforeGPU []float64
}

// Before reads label's GPU memory (when a memory source is set) just
// before op, a sleep or a KV release (Level record.LevelKVRelease), that
// the caller then sends (Pool.Do, or Prepare and Send) and verifies;
// Asleep takes the transition, Finish completes the measurement. A
// transition of label not verified yet is verified first, and the model's
// correctness reference is taken: the read and the sleep belong together.
func (mm Memory) Before(ctx context.Context, label string, op Op) (*MeasuredSleep, error) {
	s := mm.f.s
	m, err := s.model(label)
	if err != nil {
		return nil, err
	}
	level := op.Level
	if op.Kind == OpReleaseKV {
		level = record.LevelKVRelease
	}
	ms := &MeasuredSleep{Label: label, Level: level, mem: mm, m: m, ReleasedGiB: math.NaN(), ReleasePercent: math.NaN()}
	if err := mm.f.s.verifyPending(ctx, m); err != nil { // the state the read meets
		return nil, err
	}
	if err := mm.f.Oracle().ensure(ctx, m); err != nil {
		return nil, fmt.Errorf("%s: %w", op.name(label), err)
	}
	smp := s.opt.Sampler
	if smp == nil {
		return ms, nil
	}
	s.refreshPIDs(m)
	r, err := smp.SampleNow(ctx)
	if err != nil {
		return nil, err
	}
	pids := s.pids(m)
	ms.before, ms.found = modelGiB(pids, r)
	ms.beforeGPU, ms.deviceBeforeGPU = modelGiBPerGPU(pids, r), usedPerGPU(r)
	ms.read = true
	mm.state(label, func(st *memState) {
		ms.delta = !ms.found && st.footprintGPU != nil
		if ms.found {
			st.awakeGiB = ms.before
		}
	})
	return ms, nil
}

// Asleep takes t, the verified transition that put the model to sleep
// (its Sent and Took), and in device-delta mode reads the device at once
// (before another model changes state: a handoff's wake). Held is then
// the time since t's answer. A t not verified yet is an error: the
// device's read must follow the verification.
func (ms *MeasuredSleep) Asleep(ctx context.Context, t *Transition) error {
	ms.Sent, ms.Took, ms.T = t.Sent, t.Took, t
	if !t.done.Load() {
		return fmt.Errorf("pool: %s: the memory asleep read before the %s was verified (Transition.Verify)", ms.Label, t.Op.step())
	}
	if ms.delta {
		s := ms.mem.f.s
		s.mu.Lock()
		ms.changes = s.changes
		s.mu.Unlock()
		r, err := s.opt.Sampler.SampleNow(ctx)
		if err != nil {
			return err
		}
		ms.deviceLeftGPU = usedPerGPU(r)
	}
	ms.Held = time.Since(ms.Answered())
	return nil
}

// Sleep is a measured op (a sleep or a KV release) with nothing timed
// from its answer: Before, the transition run and verified (Pool.Run),
// Asleep. The MeasuredSleep is nil when Before failed; its Sent and Took
// are the transition's, whatever the error (zero when it was not sent).
func (mm Memory) Sleep(ctx context.Context, label string, op Op) (*MeasuredSleep, error) {
	ms, err := mm.Before(ctx, label, op)
	if err != nil {
		return nil, err
	}
	t, err := mm.f.Run(ctx, label, op)
	ms.Sent, ms.Took, ms.T = t.Sent, t.Took, t
	if err != nil {
		return ms, err
	}
	return ms, ms.Asleep(ctx, t)
}

// Answered is when the sleep answered: Sent + Took, where the harness's
// own span (Held) begins.
func (ms *MeasuredSleep) Answered() time.Time { return ms.Sent.Add(ms.Took) }

// Finish reads the model's memory asleep, sets what the sleep released
// (ReleasedGiB; at level 1 ReleasePercent; per GPU on several) and returns
// the memory left asleep in GiB: NaN when memory is not sampled or the
// source lists none of the model's processes (Note says so). The read is
// protocol.settle_s after the sleep's answer at the earliest (Finish
// waits for it, at once if that has passed), whoever calls it: a cycle
// after its hold, a switch after the woken model's first token (issue 50:
// those read 30 ms after their sleep, the cycles 0.5 s, and one
// release_fraction mixed both).
func (ms *MeasuredSleep) Finish(ctx context.Context) (float64, error) {
	s := ms.mem.f.s
	if !ms.read {
		return math.NaN(), nil
	}
	wait := true
	if ms.delta {
		// A device another model changed since can no longer say this
		// model's share: the read right after the sleep (Asleep's)
		// stands, and waiting reads nothing new. There a switch's release
		// is that early read, as docs/metrics.md says.
		s.mu.Lock()
		wait = s.changes == ms.changes
		s.mu.Unlock()
	}
	if wait {
		if err := sleepCtx(ctx, time.Until(ms.Answered().Add(seconds(s.cfg.Protocol.SettleS)))); err != nil {
			return math.NaN(), err
		}
	}
	if ms.delta {
		s.mu.Lock()
		quiet := s.changes == ms.changes
		s.mu.Unlock()
		if quiet { // only this sleep changed the device since: read it again, later
			r, err := s.opt.Sampler.SampleNow(ctx)
			if err != nil {
				return math.NaN(), err
			}
			ms.deviceLeftGPU = usedPerGPU(r)
		}
		return ms.finishDelta(), nil
	}
	r, err := s.opt.Sampler.SampleNow(ctx)
	if err != nil {
		return math.NaN(), err
	}
	pids := s.pids(ms.m)
	asleep, foundAsleep := modelGiB(pids, r)
	if !ms.found || !foundAsleep {
		ms.Note = fmt.Sprintf("the %s memory source listed none of model %s's processes %v (NVML in another PID namespace?): residual and release need per-process figures and are absent", s.cfg.Memory, ms.Label, pids)
		return math.NaN(), nil
	}
	ms.ReleasedGiB = max(0, ms.before-asleep)
	if ms.Level == 1 {
		ms.ReleasePercent = gpu.ReleasePercent(ms.before, asleep)
	}
	ms.perGPU(ms.beforeGPU, modelGiBPerGPU(pids, r))
	return asleep, nil
}

// perGPU sets, on a run of several GPUs, the model's memory left asleep
// on each and (level 1) the share each released.
func (ms *MeasuredSleep) perGPU(before, asleep []float64) {
	if len(before) < 2 || len(before) != len(asleep) {
		return
	}
	ms.ResidualPerGPU = asleep
	if ms.Level == 1 {
		pcts := make([]float64, len(before))
		for i := range before {
			pcts[i] = gpu.ReleasePercent(before[i], asleep[i])
		}
		ms.ReleasePercentPerGPU = pcts
	}
}

// finishDelta attributes by the device's change: released is what the
// device gave back over the sleep, the residual the awake footprint less it.
func (ms *MeasuredSleep) finishDelta() float64 {
	var footprint float64
	var footGPU []float64
	ms.mem.state(ms.Label, func(st *memState) { footprint, footGPU = st.footprint, st.footprintGPU })
	var released float64
	if before, left := sum(ms.deviceBeforeGPU), sum(ms.deviceLeftGPU); before > left {
		released = float64(before-left) / record.GiB
	}
	residual := max(0, footprint-released)
	ms.ReleasedGiB = released
	if n := len(footGPU); n > 1 && len(ms.deviceBeforeGPU) == n && len(ms.deviceLeftGPU) == n {
		left := make([]float64, n)
		for i := range n {
			rel := max(0, float64(ms.deviceBeforeGPU[i])-float64(ms.deviceLeftGPU[i])) / record.GiB
			left[i] = max(0, footGPU[i]-rel)
		}
		ms.perGPU(footGPU, left)
	}
	if ms.Level == 1 {
		ms.ReleasePercent = gpu.ReleasePercent(footprint, residual)
	}
	return residual
}

// modelGiB is the GPU memory of a model's processes in a sample; false
// when the source lists none of them (NVML in another PID namespace, or no
// per-process support).
func modelGiB(pids []int, s gpu.Sample) (float64, bool) {
	found := false
	for _, p := range pids {
		_, ok := s.Procs[p]
		found = found || ok
	}
	return float64(gpu.ProcsUsed(s.Reading, pids)) / record.GiB, found
}

// modelGiBPerGPU is modelGiB on each GPU of the sample.
func modelGiBPerGPU(pids []int, s gpu.Sample) []float64 {
	var out []float64
	for _, d := range s.PerDevice() {
		out = append(out, float64(gpu.ProcsUsed(d, pids))/record.GiB)
	}
	return out
}

// sum adds byte counts.
func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// usedPerGPU is each GPU's used bytes in a sample (their sum is its Used).
func usedPerGPU(s gpu.Sample) []uint64 {
	var out []uint64
	for _, d := range s.PerDevice() {
		out = append(out, d.Used)
	}
	return out
}

func freeBytes(r gpu.Reading) uint64 {
	if r.Used >= r.Total {
		return 0
	}
	return r.Total - r.Used
}
