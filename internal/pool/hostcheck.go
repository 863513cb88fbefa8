package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
)

// ErrHostShort is a sleep the host could not back: the host memory the
// runner may use is short of what the sleep pins (a level-1 sleep's
// weight backup, the graph pool's with --sleep-mode-offload-cudagraph)
// plus thresholds.min_host_headroom_gib. The sleep is not sent: vLLM
// would copy the weights into pinned host memory and, on a full host,
// fail with its engine dead (ls1intum/edutelligence#583) or push the host
// into swap and the OOM killer (#576, #777 there).
var ErrHostShort = errors.New("host memory short of a sleep's pinned backup")

// checkHost is asked before every sleep (Pool.Prepare), with
// thresholds.min_host_headroom_gib set for label: the host must have what
// the sleep will pin plus that headroom available (HostCapacity; the
// headroom also covers the sleep call's transient peak, which the
// state-cost phase measures), else an error wrapping ErrHostShort naming
// the model, the GiB needed and of what, the GiB free and where that
// figure came from (the cgroup's headroom or MemAvailable). What a sleep
// pins: at level 1 label's weight backup (BackupGiB, over every
// tensor-parallel worker; none where this server holds its backup from an
// earlier level-1 sleep), and at either level, with
// --sleep-mode-offload-cudagraph, its graph pool's backup
// (GraphBackupGiB; none after this server's first sleep, which made it
// for the process's life); on vllmsim × sim.host_scale. A level-2 sleep
// without the option pins nothing: no check. A backup not known is left
// out, saying so (a level-1 sleep whose weights are not known either is
// no check: nothing to compare); a host that cannot be read is an error.
func (mm Memory) checkHost(ctx context.Context, label string, level int) error {
	if ctx.Err() != nil {
		return nil // a cancelled sleep fails on its own
	}
	head := mm.f.s.cfg.ThresholdsFor(label).MinHostHeadroomGiB
	if head == 0 {
		return nil
	}
	var heldWeights, slept bool
	if m, err := mm.f.s.model(label); err == nil {
		mm.f.s.mu.Lock()
		heldWeights = m.pinnedBy != nil && m.pinnedBy == m.srv
		slept = m.srv != nil && m.sleeps > 0
		mm.f.s.mu.Unlock()
	}
	var parts []string
	need := head
	add := func(gib float64, how string) {
		if mm.f.s.cfg.Command == "vllmsim" && mm.f.s.cfg.Sim.HostScale != 1 {
			gib, how = gib*mm.f.s.cfg.Sim.HostScale, fmt.Sprintf("%s × sim.host_scale %g (what vllmsim really allocates)", how, mm.f.s.cfg.Sim.HostScale)
		}
		need += gib
		parts = append(parts, fmt.Sprintf("%.2f GiB: %s", gib, how))
	}
	if level == 1 {
		backup, how := mm.BackupGiB(label)
		switch {
		case heldWeights: // this server made its backup at an earlier level-1 sleep and keeps it
			parts = append(parts, "pinned backup 0 GiB: held already since this server's first level-1 sleep")
		case math.IsNaN(backup):
			return nil // nothing to compare
		default:
			add(backup, "pinned backup, "+how)
		}
	}
	switch graph, how := mm.GraphBackupGiB(label); {
	case graph == 0:
	case slept:
		parts = append(parts, "graph pool 0 GiB: backed up already at this server's first sleep")
	case math.IsNaN(graph):
		parts = append(parts, "graph pool not counted: "+how)
	default:
		add(graph, "pinned "+how)
	}
	if level != 1 && need == head { // a level-2 sleep that pins nothing
		return nil
	}
	c, err := mm.f.Procs().HostCapacity()
	if err != nil {
		return fmt.Errorf("sleep %s level %d: host memory check (min_host_headroom_gib): %w", label, level, err)
	}
	free := c.Available.GiB()
	if free >= need {
		return nil
	}
	return fmt.Errorf("sleep %s level %d not sent: %w: %s needs %.2f GiB (%s; + min_host_headroom_gib %.2f), the host has %.2f GiB free (%s)",
		label, level, ErrHostShort, label, need, strings.Join(parts, "; "), head, free, c.Available.Source)
}

// releasesHostMemory: the servers (which inherit the harness's
// environment) free the pinned backup after each wake (vLLM's
// VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY=1, docs/vllm-api.md §10).
func releasesHostMemory() bool { return os.Getenv("VLLM_SLEEP_MODE_RELEASE_HOST_MEMORY") == "1" }
