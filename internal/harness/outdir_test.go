package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOutDirIsLockedByARun: a second run into the out_dir of a run that
// is going (two CI jobs in one checkout, make bench beside CI) is refused
// at its start, naming the holder (its pid and start time) and the fix,
// and leaves the first run's files as they were; a config error of that
// second run writes no report over the first run's. Once the first run
// ended, the out_dir is free again. On 650cbfc the second run claimed the
// out_dir and both wrote into it.
func TestOutDirIsLockedByARun(t *testing.T) {
	cfg := small(t)
	h, err := Open(t.Context(), cfg)
	require.NoError(t, err)
	before, err := os.ReadFile(filepath.Join(cfg.OutDir, "report.json"))
	require.NoError(t, err, "the first run's provisional report")

	_, err = Open(t.Context(), cfg)
	var busy *OutDirBusy
	require.ErrorAs(t, err, &busy, "a second run into the same out_dir is refused")
	for _, want := range []string{fmt.Sprintf("pid %d on host ", os.Getpid()), ", started 20", "in use by another wakebench run",
		"removed and wrote nothing there", "WAKEBENCH_OUT_DIR", filepath.Join(cfg.OutDir, LockFile)} {
		assert.Contains(t, err.Error(), want)
	}

	// What main_test.go does with a config error, and with the refusal.
	err = WriteAborted(cfg, "config", errors.New("config: protocol.handoffs: 0"))
	require.ErrorAs(t, err, &busy, "the aborted run says it wrote nothing")
	require.NoError(t, WriteAborted(cfg, "setup", busy), "the refusal itself is the message: nothing more to say or write")
	require.ErrorAs(t, WriteNotRun(cfg, "no GPU"), &busy, "a NOT RUN report is refused the same way")
	after, err := os.ReadFile(filepath.Join(cfg.OutDir, "report.json"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "the first run's report is untouched")
	assert.FileExists(t, filepath.Join(cfg.OutDir, "samples.csv"), "the first run's stream is untouched")

	_, err = h.Close(nil)
	require.NoError(t, err)
	again, err := Open(t.Context(), cfg)
	require.NoError(t, err, "the lock ends with the run that held it")
	_, err = again.Close(nil)
	require.NoError(t, err)
}

// envLockHolder names the directory the helper process of
// TestOutDirLockDiesWithItsHolder locks (a variable of this test alone).
const envLockHolder = "HARNESS_TEST_LOCK_HOLDER"

// TestOutDirLockHolder is the helper process of
// TestOutDirLockDiesWithItsHolder: it locks the out_dir it is given, says
// so, and waits to be killed.
func TestOutDirLockHolder(t *testing.T) {
	dir := os.Getenv(envLockHolder)
	if dir == "" {
		t.Skip("the helper process of TestOutDirLockDiesWithItsHolder")
	}
	l, err := lockOutDir(dir)
	require.NoError(t, err)
	defer l.release()
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent kills it (or its stdin closes)
}

// TestOutDirLockDiesWithItsHolder: a run killed outright (SIGKILL, the OOM
// killer) leaves no stale lock: its out_dir is refused while it lives,
// naming its pid, and free the moment it is dead.
func TestOutDirLockDiesWithItsHolder(t *testing.T) {
	if os.Getenv(envLockHolder) != "" {
		t.Skip("this is the helper process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutDirLockHolder$")
	cmd.Env = append(os.Environ(), envLockHolder+"="+dir)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	locked := false
	for !locked && lines.Scan() {
		locked = strings.TrimSpace(lines.Text()) == "locked"
	}
	if !locked {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper did not lock the out_dir")
	}

	_, err = lockOutDir(dir)
	var busy *OutDirBusy
	require.ErrorAs(t, err, &busy, "held by the other process")
	assert.Contains(t, busy.Holder, fmt.Sprintf("pid %d on host ", cmd.Process.Pid), "the holder named by its pid")

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // dead and reaped: its descriptors are closed
	l, err := lockOutDir(dir)
	require.NoError(t, err, "a SIGKILLed holder leaves no lock")
	l.release()
}

// TestOnlyARunsOwnFilesAreRemoved: out_dir holding a user's files and
// folders beside an earlier run's outputs, and a run that stops at a bad
// config: the earlier run's outputs are gone, the user's are not — a
// kubernetes/ folder of the user's (no marker) included, which 650cbfc
// removed recursively at every start. A kubernetes/ a run wrote (with
// its marker) is removed; the Kubernetes phase refuses to write its logs
// into the user's, naming it.
func TestOnlyARunsOwnFilesAreRemoved(t *testing.T) {
	cfg := small(t)
	out := cfg.OutDir
	mine := []string{"notes.md", "kubernetes/deployment.yaml", "data/weights.txt", "A.log.keep"}
	theirs := []string{"bench.txt", "samples.csv", "A.log", "B.log", "compare.txt"}
	for _, name := range append(mine, theirs...) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(out, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(out, name), []byte("x\n"), 0o644))
	}
	_, err := kubeLogDir(out)
	require.Error(t, err, "the user's kubernetes/ is not the run's to write into")
	assert.Contains(t, err.Error(), "holds a kubernetes/ that wakebench did not write")
	assert.Contains(t, err.Error(), "move that folder, or set out_dir elsewhere")

	require.NoError(t, WriteAborted(cfg, "config", errors.New("config: protocol.handoffs: 0")))
	for _, name := range mine {
		assert.FileExists(t, filepath.Join(out, name), "the user's %s stays", name)
	}
	for _, name := range theirs {
		assert.NoFileExists(t, filepath.Join(out, name), "the earlier run's %s is removed", name)
	}
	assert.Equal(t, "FAIL", readReport(t, out).Status)

	// A kubernetes/ a run wrote: removed by the next run's claim.
	own := small(t)
	logs, err := kubeLogDir(own.OutDir)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(logs, "kube-apiserver.log"), []byte("x\n"), 0o644))
	again, err := kubeLogDir(own.OutDir)
	require.NoError(t, err, "the run's own folder, written again")
	assert.Equal(t, logs, again)
	require.NoError(t, WriteAborted(own, "config", errors.New("config: protocol.handoffs: 0")))
	assert.NoDirExists(t, logs, "an earlier run's kubernetes/ is removed")
}
