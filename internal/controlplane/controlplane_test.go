package controlplane

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wakebench/wakebench/internal/kube"
	"github.com/wakebench/wakebench/internal/server"
)

// binDir is the control plane's binaries (make k8s sets
// WAKEBENCH_K8S_BIN); without them the tests that start one say so.
func binDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("WAKEBENCH_K8S_BIN")
	if d == "" {
		t.Skip("WAKEBENCH_K8S_BIN unset: the control plane's tests run in make k8s (which builds the binaries)")
	}
	require.NoError(t, Check(d), "WAKEBENCH_K8S_BIN is set: its binaries must be there")
	return d
}

func TestCheckNamesWhatIsMissing(t *testing.T) {
	err := Check(t.TempDir())
	require.Error(t, err)
	for _, c := range Components {
		assert.Contains(t, err.Error(), c)
	}
	assert.Contains(t, err.Error(), "scripts/k8s-build.sh")
}

func TestStartServesTheAPIAndStopLeavesNothing(t *testing.T) {
	bin := binDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cp, err := Start(ctx, Options{BinDir: bin, Dir: t.TempDir(), FeatureGates: []string{"DRAConsumableCapacity=true"}})
	require.NoError(t, err)
	defer cp.Stop()
	c, err := kube.Connect(cp.Kubeconfig)
	require.NoError(t, err)
	ns, err := c.Core.Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "default", ns.Name)
	// The DRA API (resource.k8s.io/v1, GA in 1.34) is served.
	_, err = c.Resource.DeviceClasses().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, cp.Alive())
	pids := make([]int, len(cp.procs))
	for i, p := range cp.procs {
		pids[i] = p.PID()
	}
	require.NoError(t, cp.Stop())
	for _, pid := range pids {
		assert.False(t, server.GroupAlive(pid), "process group %d left behind", pid)
	}
	_, err = c.Core.Namespaces().Get(ctx, "default", metav1.GetOptions{})
	assert.Error(t, err, "the API server is gone after Stop")
}
