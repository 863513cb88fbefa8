package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wakebench/wakebench/internal/controlplane"
)

// kubernetesRun opens a run of the Kubernetes phase alone on the local cluster.
func kubernetesRun(t *testing.T, timeoutS float64) *Run {
	cfg := small(t)
	cfg.Models[0].GPUMemoryUtilization, cfg.Models[1].GPUMemoryUtilization = 0.4, 0.4
	cfg.Kubernetes.ControlPlane, cfg.Kubernetes.TimeoutS = "local", timeoutS
	require.NoError(t, cfg.Validate())
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	return h
}

// Without the control plane's binaries the phase fails at once, saying how
// to get them, and the report says so.
func TestKubernetesWithoutBinariesSaysHowToBuildThem(t *testing.T) {
	t.Setenv(EnvK8sBin, "")
	h := kubernetesRun(t, 5)
	_, err := h.Kubernetes(t.Context(), t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "run make k8s, or scripts/k8s-build.sh")
	rep, err := h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "FAIL", rep.Status)
	require.Len(t, rep.Failures, 1)
	assert.Equal(t, "kubernetes", rep.Failures[0].Phase)
	assert.Contains(t, rep.Phases, "kubernetes")
	assert.False(t, rep.DRA.Executed)
}

// A scheduler that runs but schedules nothing (a hung process in place of
// kube-scheduler): the run fails naming kube-scheduler, the report is
// written with the failure, and no server process is left behind.
func TestKubernetesBrokenSchedulerIsANamedFail(t *testing.T) {
	bin := os.Getenv(EnvK8sBin)
	if bin == "" {
		t.Skip(EnvK8sBin + " unset: the Kubernetes phase's end-to-end tests run in make k8s")
	}
	require.NoError(t, controlplane.Check(bin))
	broken := t.TempDir()
	for _, c := range controlplane.Components {
		require.NoError(t, os.Symlink(filepath.Join(bin, c), filepath.Join(broken, c)))
	}
	require.NoError(t, os.Remove(filepath.Join(broken, controlplane.Scheduler)))
	require.NoError(t, os.WriteFile(filepath.Join(broken, controlplane.Scheduler), []byte("#!/bin/sh\nexec sleep 3600\n"), 0o755))
	t.Setenv(EnvK8sBin, broken)

	h := kubernetesRun(t, 4)
	_, err := h.Kubernetes(t.Context(), t.Logf)
	require.Error(t, err)
	assert.ErrorContains(t, err, "is kube-scheduler running?")
	rep, err := h.Close(nil)
	require.NoError(t, err)
	assert.Equal(t, "FAIL", rep.Status)
	require.Len(t, rep.Failures, 1)
	assert.Equal(t, "kubernetes", rep.Failures[0].Phase)
	assert.Contains(t, rep.Failures[0].Error, "wakebench-a-1 not scheduled")
	written := readReport(t, h.cfg.OutDir)
	assert.Equal(t, "FAIL", written.Status)
	assert.True(t, written.DRA.Executed, "the phase ran, on the local cluster, and failed")
	assert.Empty(t, written.DRA.PodStarts)
	_, err = os.Stat(filepath.Join(h.cfg.OutDir, "kubernetes", "kube-apiserver.log"))
	assert.NoError(t, err, "the control plane's logs are kept in out_dir")
}
