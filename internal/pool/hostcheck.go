package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
)

// ErrHostShort is a level-1 sleep the host could not back: the host
// memory the runner may use is short of the model's pinned weight backup
// plus thresholds.min_host_headroom_gib. The sleep is not sent: vLLM
// would copy the weights into pinned host memory and, on a full host,
// fail with its engine dead (ls1intum/edutelligence#583) or push the host
// into swap and the OOM killer (#576, #777 there).
var ErrHostShort = errors.New("host memory short of a level-1 sleep's pinned backup")

// checkHost is asked before every sleep (Pool.Prepare): at level 1,
// with thresholds.min_host_headroom_gib set for label, the host must have
// label's pinned backup (BackupGiB, over every tensor-parallel worker; none
// where this server holds its backup from an earlier level-1 sleep; on
// vllmsim × sim.host_scale) plus that headroom available (HostCapacity;
// the headroom also covers the sleep call's transient peak, which the
// state-cost phase measures), else an error wrapping ErrHostShort naming the model,
// the GiB needed, the GiB free and where that figure came from (the
// cgroup's headroom or MemAvailable). A backup not known is no check
// (nothing to compare); a host that cannot be read is an error.
func (mm Memory) checkHost(ctx context.Context, label string, level int) error {
	if level != 1 || ctx.Err() != nil {
		return nil // a cancelled sleep fails on its own
	}
	head := mm.f.s.cfg.ThresholdsFor(label).MinHostHeadroomGiB
	if head == 0 {
		return nil
	}
	backup, how := mm.BackupGiB(label)
	if math.IsNaN(backup) {
		return nil
	}
	if m, err := mm.f.s.model(label); err == nil {
		mm.f.s.mu.Lock()
		held := m.pinnedBy != nil && m.pinnedBy == m.srv
		mm.f.s.mu.Unlock()
		if held { // this server made its backup at an earlier level-1 sleep and keeps it
			backup, how = 0, "held already since this server's first level-1 sleep"
		}
	}
	if mm.f.s.cfg.Command == "vllmsim" && mm.f.s.cfg.Sim.HostScale != 1 {
		backup, how = backup*mm.f.s.cfg.Sim.HostScale, fmt.Sprintf("%s × sim.host_scale %g (what vllmsim really allocates)", how, mm.f.s.cfg.Sim.HostScale)
	}
	c, err := mm.f.Procs().HostCapacity()
	if err != nil {
		return fmt.Errorf("sleep %s level 1: host memory check (min_host_headroom_gib): %w", label, err)
	}
	need, free := backup+head, c.Available.GiB()
	if free >= need {
		return nil
	}
	return fmt.Errorf("sleep %s level 1 not sent: %w: %s needs %.2f GiB (pinned backup %.2f GiB: %s; + min_host_headroom_gib %.2f), the host has %.2f GiB free (%s)",
		label, ErrHostShort, label, need, backup, how, head, free, c.Available.Source)
}

// releasesHostMemory: the servers (which inherit the harness's
// environment) free the pinned backup after each wake (vLLM's
// VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1, docs/vllm-api.md §10).
func releasesHostMemory() bool { return os.Getenv("VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY") == "1" }
