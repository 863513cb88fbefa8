package config

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MaxConfigBytes bounds the config file (WAKEBENCH_CONFIG): a config is
// kilobytes, so a bigger file is another file (a log, a disk image), and
// /dev/zero would fill the harness's memory.
const MaxConfigBytes = 1 << 20

// wantConfig says what WAKEBENCH_CONFIG must name.
const wantConfig = "want the JSON config file (testdata/example-config.json shows one)"

// readConfigFile reads the config file at path: a regular file of at most
// MaxConfigBytes; its errors do not repeat path (Load names it). It looks before it opens (opening a FIFO waits for a
// writer, a device may be endless), opens without blocking and looks
// again at what it opened, in case the path changed between, as package
// gate reads a baseline.
func readConfigFile(path string) ([]byte, error) {
	check := func(fi fs.FileInfo) error {
		switch {
		case !fi.Mode().IsRegular():
			return fmt.Errorf("is %s: %s", fileKind(fi.Mode()), wantConfig)
		case fi.Size() > MaxConfigBytes:
			return fmt.Errorf("holds %d bytes, beyond %d MiB: not a config file (a config is kilobytes): %s", fi.Size(), MaxConfigBytes>>20, wantConfig)
		}
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if err := check(fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("grew past %d MiB while read: not a config file: %s", MaxConfigBytes>>20, wantConfig)
	}
	return b, nil
}

// MaxBaselineBytes bounds one baseline bench.txt: a run's is kilobytes (a
// few hundred benchfmt lines), so 64 MiB is thousands of runs' worth. A
// bigger file is not a bench.txt (a log, a core dump, a disk image), and
// package gate reads each file whole (and no more than this).
const MaxBaselineBytes = 64 << 20

// wantBaseline says what a baseline entry must be.
const wantBaseline = "want a bench.txt file or a directory of runs"

// BaselineEntries splits a baseline setting into its entries, as config
// load and package gate read it: at commas and the OS's path-list
// separator (":" on Unix), each entry trimmed, blank ones dropped.
func BaselineEntries(spec string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == os.PathListSeparator }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// BaselineGlobs are the runs a baseline directory holds (config load
// checks them, package gate's LoadBaseline reads them): its own bench.txt,
// its subdirectories' (one out_dir per run) and its *.bench.txt files.
func BaselineGlobs() []string { return []string{"bench.txt", "*/bench.txt", "*.bench.txt"} }

// checkBaseline checks the baseline setting: each entry a bench.txt file
// of at most MaxBaselineBytes or a directory holding such runs, none of
// them inside outDir (the run's out_dir, which it clears when it starts).
// Only os.Stat looks at an entry (opening a FIFO would wait for a writer);
// "" is no gate, a setting of separators and blanks alone names no file.
func checkBaseline(bad badFunc, spec, outDir string) {
	entries := BaselineEntries(spec)
	if spec != "" && len(entries) == 0 {
		bad("baseline", "%q names no file: %s (comma-separated), or leave it empty for no regression gate", spec, wantBaseline)
	}
	for _, e := range entries {
		fi, err := os.Stat(e)
		if err != nil {
			bad("baseline", "%v (a previous run's bench.txt, or a directory of runs)", err)
			continue
		}
		if Within(e, outDir) {
			badInOutDir(bad, e, outDir)
			continue
		}
		if !fi.IsDir() {
			checkBench(bad, e, fi)
			continue
		}
		var found []string
		for _, pat := range BaselineGlobs() {
			m, err := filepath.Glob(filepath.Join(e, pat))
			if err != nil {
				bad("baseline", "%s: %v", e, err)
			}
			found = append(found, m...)
		}
		if len(found) == 0 {
			bad("baseline", "%s: a directory with no bench.txt, */bench.txt or *.bench.txt: %s", e, wantBaseline)
		}
		inOut := false
		for _, f := range found {
			if fi, err := os.Stat(f); err != nil {
				bad("baseline", "%v", err)
			} else if !inOut && Within(f, outDir) { // a directory of runs holding out_dir's bench.txt
				inOut = true
				badInOutDir(bad, f, outDir)
			} else {
				checkBench(bad, f, fi)
			}
		}
	}
}

// badInOutDir refuses a baseline file or directory path inside out_dir.
func badInOutDir(bad badFunc, path, outDir string) {
	bad("baseline", "%s is inside out_dir %s, whose outputs a run removes when it starts: the baseline would be gone before the gate reads it; move it out of out_dir (e.g. mv %s base.bench.txt) and name the new path", path, outDir, path)
}

// Within reports whether path is dir, or inside it: the same directory
// entry (os.Lstat; dir need not be a directory), or, dir a directory,
// path as it is on disk (symbolic links followed) below it, compared by
// os.SameFile. False when either does not exist: nothing that exists is
// inside what does not.
func Within(path, dir string) bool {
	a, err := os.Lstat(path)
	if err != nil {
		return false
	}
	if b, err := os.Lstat(dir); err == nil && os.SameFile(a, b) {
		return true
	}
	di, err := os.Stat(dir)
	if err != nil || !di.IsDir() {
		return false
	}
	p, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	for {
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, di) {
			return true
		}
		parent := filepath.Dir(p)
		if parent == p {
			return false
		}
		p = parent
	}
}

// BaselineFiles are the files a baseline setting names, as far as os.Stat
// finds them: each entry that is no directory, and the runs each directory
// holds (BaselineGlobs). A run never removes one (package harness's claim
// of its out_dir), even when the config that names it is refused.
func BaselineFiles(spec string) []string {
	var out []string
	for _, e := range BaselineEntries(spec) {
		fi, err := os.Stat(e)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			out = append(out, e)
			continue
		}
		for _, pat := range BaselineGlobs() {
			m, _ := filepath.Glob(filepath.Join(e, pat))
			out = append(out, m...)
		}
	}
	return out
}

// checkBench checks one baseline bench.txt, fi its os.Stat (CheckBench).
func checkBench(bad badFunc, path string, fi fs.FileInfo) {
	if err := CheckBench(path, fi); err != nil {
		bad("baseline", "%v", err)
	}
}

// CheckBench says why the file at path, fi its stat, cannot be a baseline
// bench.txt: not a regular file (a FIFO would block its reader, a device
// may be endless), or more than MaxBaselineBytes; nil when it can.
// Config load and package gate, which reads it, ask the same.
func CheckBench(path string, fi fs.FileInfo) error {
	switch {
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is %s: %s", path, fileKind(fi.Mode()), wantBaseline)
	case fi.Size() > MaxBaselineBytes:
		return fmt.Errorf("%s holds %d bytes, beyond %d MiB: not a bench.txt (a run's is kilobytes): %s", path, fi.Size(), MaxBaselineBytes>>20, wantBaseline)
	}
	return nil
}

// fileKind names what a file that is neither regular nor a directory is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (reading it waits for a writer)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// checkFile checks that path, named by key, is a regular file (os.Stat,
// so a FIFO is never opened); want says what the file should be.
func checkFile(bad badFunc, key, path, want string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		bad(key, "%v (%s)", err, want)
	case !fi.Mode().IsRegular():
		bad(key, "%s is %s (%s)", path, fileKind(fi.Mode()), want)
	}
}

// checkDir checks that path, named by key, is a directory.
func checkDir(bad badFunc, key, path, want string) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		bad(key, "%v (%s)", err, want)
	case !fi.IsDir():
		bad(key, "%s is not a directory (%s)", path, want)
	}
}

// checkName checks a Kubernetes name with one of package validation's
// Is… functions; what names the object ("a namespace").
func checkName(bad badFunc, key, name, what string, valid func(string) []string) {
	if errs := valid(name); len(errs) > 0 {
		bad(key, "%q is not %s name: %s", name, what, strings.Join(errs, "; "))
	}
}
