package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wakebench/wakebench/internal/config"
)

// LockFile is the file of out_dir a run holds an exclusive flock on from
// before it removes or writes anything there until its last output is
// written: a second run into the same out_dir (two CI jobs in one
// checkout, make bench beside a CI run) is refused, naming the holder that
// the file's text names. The kernel drops the lock when the holder's
// process ends, however it ends (SIGKILL included), so no stale lock is
// left; the file itself stays, naming the last run that held it.
const LockFile = ".wakebench.lock"

// kubeMarker is the file a run writes into out_dir/kubernetes when it
// creates that folder for the Kubernetes phase's logs: only a folder that
// holds it is wakebench's, and removed by the next run's claim.
const kubeMarker = ".wakebench"

// OutDirBusy is the error of a run refused because another run holds its
// out_dir (LockFile).
type OutDirBusy struct {
	Dir    string // out_dir
	Holder string // the holder as its lock file names it ("" if not yet written)
}

func (e *OutDirBusy) Error() string {
	holder := e.Holder
	if holder == "" {
		holder = "it has not yet written its pid"
	}
	return fmt.Sprintf("out_dir %s is in use by another wakebench run (%s; lock file %s): this run removed and wrote nothing there; "+
		"wait for that run to end, or give this run an out_dir of its own (WAKEBENCH_OUT_DIR=…, or out_dir in the config)",
		e.Dir, holder, filepath.Join(e.Dir, LockFile))
}

// outLock is a run's hold on its out_dir: an open LockFile under an
// exclusive flock, released by release or when the process ends.
type outLock struct {
	f *os.File
}

// ownLockGrace is how long lockOutDir waits for a lock that this process
// itself held and released: see flockOwn.
const ownLockGrace = 2 * time.Second

// flockOwn takes f's exclusive flock without waiting, except on a lock
// whose file names this process as its holder: a run of this process
// released it (Open failing, then WriteAborted, as TestMain does), but a
// child that this process forked for a server in the meantime shares the
// lock's open file until its exec closes it (O_CLOEXEC), and on a busy
// machine that can take milliseconds (seen in CI's make test). That lock
// is waited for, ownLockGrace at most; another process's never.
func flockOwn(f *os.File, path string) error {
	deadline := time.Now().Add(ownLockGrace)
	own := fmt.Sprintf("pid %d ", os.Getpid())
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), own) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockOutDir takes dir's lock without waiting (see flockOwn): *OutDirBusy if another run
// (of this process or another) holds it. The holder's pid, host and start
// time are written into the file for a refused run to name.
func lockOutDir(dir string) (*outLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("out_dir %s: open its lock file: %w", dir, err)
	}
	if err := flockOwn(f, path); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			return nil, &OutDirBusy{Dir: dir, Holder: strings.TrimSpace(string(b))}
		}
		if errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			// A filesystem without flock (NFS without its lock daemon): the
			// run goes on unguarded rather than not at all, and says so.
			fmt.Fprintf(os.Stderr, "wakebench: out_dir %s cannot be locked (%v): a second run into it would not be refused\n", dir, err)
			return &outLock{}, nil
		}
		return nil, fmt.Errorf("out_dir %s: lock %s: %w", dir, path, err)
	}
	host, _ := os.Hostname()
	holder := fmt.Sprintf("pid %d on host %s, started %s\n", os.Getpid(), host, time.Now().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(holder), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("out_dir %s: write its lock file: %w", dir, err)
	}
	return &outLock{f: f}, nil
}

// release drops the lock (nil, or released already: nothing).
func (l *outLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// kubeLogDir is out_dir's folder for the Kubernetes phase's logs, made
// wakebench's (created with its marker) if it is not there. A folder
// there without the marker is not the run's to write into: refused,
// naming it.
func kubeLogDir(outDir string) (string, error) {
	dir := filepath.Join(outDir, kubeLogs)
	if _, err := os.Lstat(dir); err == nil {
		if ownKubeLogs(outDir) {
			return dir, nil
		}
		return "", fmt.Errorf("out_dir %s holds a %s/ that wakebench did not write (it lacks the marker %s): the Kubernetes phase writes its logs there and the next run removes them; "+
			"move that folder, or set out_dir elsewhere (WAKEBENCH_OUT_DIR=…)", outDir, kubeLogs, kubeMarker)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("out_dir %s/%s: %w", outDir, kubeLogs, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("out_dir %s: create %s/: %w", outDir, kubeLogs, err)
	}
	note := "written by wakebench: this folder holds a run's Kubernetes logs, and the next run into this out_dir removes it\n"
	if err := os.WriteFile(filepath.Join(dir, kubeMarker), []byte(note), 0o644); err != nil {
		return "", fmt.Errorf("out_dir %s: mark %s/ as wakebench's: %w", outDir, kubeLogs, err)
	}
	return dir, nil
}

// ownKubeLogs reports whether out_dir/kubernetes is a folder a run wrote
// (it holds the marker).
func ownKubeLogs(outDir string) bool {
	dir := filepath.Join(outDir, kubeLogs)
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() {
		return false
	}
	m, err := os.Lstat(filepath.Join(dir, kubeMarker))
	return err == nil && m.Mode().IsRegular()
}

// ClaimOutDir holds out_dir for a run that starts no server of its own and
// writes its outputs there (a variant run's parent, whose children write
// below it, each holding its own folder): locked as a run locks it (a
// second run into it is refused with *OutDirBusy) and claimed (an earlier
// run's outputs removed). release ends the hold.
func ClaimOutDir(cfg config.Config) (release func(), err error) {
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("out_dir %s: %w", cfg.OutDir, err)
	}
	lock, err := lockOutDir(cfg.OutDir)
	if err != nil {
		return nil, err
	}
	if err := claim(cfg); err != nil {
		lock.release()
		return nil, err
	}
	return lock.release, nil
}
